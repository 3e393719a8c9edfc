import { useEffect, useState } from 'preact/hooks';
import { admin } from '../api';
import { FormStatus, useSave, useServerConfig } from './forms';

export interface Column<T> {
  key: keyof T & string;
  label: string;
  type?: 'text' | 'url' | 'checkbox' | 'color';
  placeholder?: string;
  /** id of a <datalist> offering values for a text column. */
  list?: string;
}

interface Props<T> {
  /** Setter name under /api/admin/config/. */
  setting: string;
  id: string;
  rows: T[];
  columns: Column<T>[];
  blank: () => T;
  /** Turn the edited rows into the setter's `value` (default: the rows themselves). */
  toValue?: (rows: T[]) => unknown;
  addLabel?: string;
}

/** Edit a list of records as table rows and save the whole list to one setting. */
export function RowsEditor<T extends Record<string, unknown>>({ setting, id, rows: initial, columns, blank, toValue, addLabel = '+ Add' }: Props<T>) {
  const { reload } = useServerConfig();
  const [rows, setRows] = useState<T[]>(initial);
  const [state, run] = useSave();
  useEffect(() => setRows(initial.map((r) => ({ ...r }))), [initial]);
  const update = (i: number, key: keyof T, value: unknown) => setRows(rows.map((r, j) => (j === i ? { ...r, [key]: value } : r)));
  const save = async (e: Event) => {
    e.preventDefault();
    if (await run(() => admin.setConfig(setting, toValue ? toValue(rows) : rows))) void reload();
  };
  return (
    <form onSubmit={save} id={id} data-setting={setting}>
      <div class="table-scroll">
        <table class="table">
          <thead>
            <tr>
              {columns.map((c) => <th key={c.key}>{c.label}</th>)}
              <th />
            </tr>
          </thead>
          <tbody>
            {rows.map((row, i) => (
              <tr key={i}>
                {columns.map((c) => (
                  <td key={c.key}>
                    {c.type === 'checkbox' ? (
                      <input type="checkbox" aria-label={c.label} checked={Boolean(row[c.key])} onChange={(e) => update(i, c.key, e.currentTarget.checked)} />
                    ) : (
                      <input
                        type={(c.type === 'url' ? 'url' : 'text') as 'text' /* preact 11 narrows props per input type */}
                        aria-label={c.label}
                        placeholder={c.placeholder}
                        list={c.list}
                        value={String(row[c.key] ?? '')}
                        onInput={(e) => update(i, c.key, e.currentTarget.value)}
                      />
                    )}
                  </td>
                ))}
                <td>
                  <button type="button" class="danger" onClick={() => setRows(rows.filter((_, j) => j !== i))}>Remove</button>
                </td>
              </tr>
            ))}
            {rows.length === 0 && (
              <tr><td colSpan={columns.length + 1} class="muted">None yet.</td></tr>
            )}
          </tbody>
        </table>
      </div>
      <div class="form-actions">
        <button type="button" onClick={() => setRows([...rows, blank()])}>{addLabel}</button>
        <button type="submit" class="primary" disabled={state.kind === 'saving'}>Save</button>
      </div>
      <FormStatus state={state} />
    </form>
  );
}
