import { render } from 'preact';
import '../styles.css';
import { AccessGate } from './Access';
import { ViewerApp } from './App';

const root = document.getElementById('app');
if (root) render(
    <AccessGate>
      <ViewerApp />
    </AccessGate>,
    root,
  );
