import { useCallback, useEffect, useState } from 'preact/hooks';
import { admin } from '../api';

/** GET an admin endpoint, with a reload function; `params` changes refetch. */
export function useAdminGet<T>(path: string, params?: Record<string, string | number | boolean | undefined>) {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const key = JSON.stringify(params ?? {});
  const reload = useCallback(async () => {
    try {
      setData(await admin.get<T>(path, params));
      setError(null);
    } catch (e) {
      setError((e as Error).message);
    }
  }, [path, key]);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, reload };
}
