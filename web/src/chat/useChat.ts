/**
 * Chat connection: registers when needed, opens `/ws?accessToken=…`, reconnects with exponential backoff,
 * re-registers on ERROR_NEEDS_REGISTRATION, stops on ERROR_USER_DISABLED, and loads history on each connect.
 */
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { api, chatSocketUrl } from '../api';
import { backoffDelay } from '../lib/backoff';
import { applyEvent, emptyChat, mergeHistory, type ChatModel } from '../lib/chatState';
import { splitFrame } from '../lib/frame';
import { clearToken, ensureToken } from './session';

export type ChatStatus = 'connecting' | 'open' | 'closed';

export interface ChatHandle {
  model: ChatModel;
  status: ChatStatus;
  error: string | null;
  /** Send a client event; false when the socket is not open. */
  send: (event: Record<string, unknown>) => boolean;
  hideMessage: (id: string) => Promise<void>;
  disableUser: (userId: string) => Promise<void>;
}

export function useChat(enabled: boolean, socketHostOverride?: string): ChatHandle {
  const [model, setModel] = useState<ChatModel>(emptyChat);
  const [status, setStatus] = useState<ChatStatus>('connecting');
  const [error, setError] = useState<string | null>(null);
  const wsRef = useRef<WebSocket | null>(null);
  const tokenRef = useRef<string | null>(null);

  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let disabled = false;
    let attempt = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;

    const retry = (fn: () => void, baseMs = 1000) => {
      if (stopped || disabled) return;
      setStatus('closed');
      timer = setTimeout(fn, backoffDelay(attempt++, baseMs));
    };

    const loadHistory = async (token: string) => {
      try {
        const history = await api.chatHistory(token);
        if (!stopped && Array.isArray(history)) setModel((m) => mergeHistory(m, history));
      } catch {
        // History is a nicety; the live socket still works without it.
      }
    };

    const connect = async (forceRegister = false) => {
      if (stopped) return;
      setStatus('connecting');
      let token: string;
      try {
        token = await ensureToken(forceRegister);
      } catch (e) {
        setError(`Could not join chat: ${(e as Error).message}`);
        retry(() => void connect(forceRegister));
        return;
      }
      if (stopped) return;
      tokenRef.current = token;
      let reregister = false;
      const ws = new WebSocket(chatSocketUrl(socketHostOverride, token));
      wsRef.current = ws;
      ws.onopen = () => {
        attempt = 0;
        setStatus('open');
        setError(null);
        void loadHistory(token);
      };
      ws.onmessage = (msg: MessageEvent) => {
        if (typeof msg.data !== 'string') return;
        const events = splitFrame(msg.data);
        for (const ev of events) {
          if (ev.type === 'ERROR_NEEDS_REGISTRATION') {
            reregister = true;
            clearToken();
          } else if (ev.type === 'ERROR_USER_DISABLED') {
            disabled = true;
            setError('You have been removed from the chat.');
          } else if (ev.type === 'ERROR_MAX_CONNECTIONS_EXCEEDED') {
            setError('The chat is full right now. Retrying…');
          }
        }
        if (events.length) setModel((m) => events.reduce(applyEvent, m));
      };
      ws.onclose = () => {
        if (wsRef.current === ws) wsRef.current = null;
        if (stopped) return;
        if (disabled) {
          setStatus('closed');
          return;
        }
        if (reregister) retry(() => void connect(true), 250);
        else retry(() => void connect());
      };
    };

    void connect();
    return () => {
      stopped = true;
      clearTimeout(timer);
      const ws = wsRef.current;
      wsRef.current = null;
      ws?.close();
    };
  }, [enabled, socketHostOverride]);

  const send = useCallback((event: Record<string, unknown>) => {
    const ws = wsRef.current;
    if (!ws || ws.readyState !== WebSocket.OPEN) return false;
    ws.send(JSON.stringify(event));
    return true;
  }, []);

  const hideMessage = useCallback(async (id: string) => {
    if (tokenRef.current) await api.hideMessage(tokenRef.current, id, false);
  }, []);

  const disableUser = useCallback(async (userId: string) => {
    if (tokenRef.current) await api.setUserEnabled(tokenRef.current, userId, false);
  }, []);

  return { model, status, error, send, hideMessage, disableUser };
}
