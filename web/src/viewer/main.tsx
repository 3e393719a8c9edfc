import { render } from 'preact';
import '../styles.css';
import { ViewerApp } from './App';

const root = document.getElementById('app');
if (root) render(<ViewerApp />, root);
