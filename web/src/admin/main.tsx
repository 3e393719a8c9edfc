import { render } from 'preact';
import '../styles.css';
import './admin.css';
import { AdminApp } from './App';

const root = document.getElementById('app');
if (root) render(<AdminApp />, root);
