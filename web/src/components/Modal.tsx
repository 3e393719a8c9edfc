import type { ComponentChildren } from 'preact';
import { useEffect } from 'preact/hooks';
import { Icon } from './Icon';

interface Props {
  title: string;
  onClose: () => void;
  small?: boolean;
  children: ComponentChildren;
}

/** A simple dialog: closes on Escape, on the close button, and on a click outside it. */
export function Modal({ title, onClose, small, children }: Props) {
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') onClose();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [onClose]);
  return (
    <div class="modal-backdrop" onClick={(e) => e.target === e.currentTarget && onClose()}>
      <div class={`modal${small ? ' small' : ''}`} role="dialog" aria-modal="true" aria-label={title}>
        <header>
          <h2>{title}</h2>
          <button type="button" class="icon" aria-label="Close" onClick={onClose}>
            <Icon name="close" />
          </button>
        </header>
        <div class="modal-body">{children}</div>
      </div>
    </div>
  );
}
