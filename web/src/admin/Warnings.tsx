/** The configuration warnings of `GET /api/admin/status` (`warnings: string[]`, e.g. a short admin password or stream key). */
import { admin } from '../api';
import { Icon } from '../components/Icon';
import { useServerConfig } from './forms';
import { usePoll } from './useAdmin';

/** The list from a status answer: a missing or malformed field is no warnings. */
export function warningsOf(status: { warnings?: unknown } | null | undefined): string[] {
  const list = status?.warnings;
  return Array.isArray(list) ? list.filter((w): w is string => typeof w === 'string' && w.trim() !== '') : [];
}

/** A banner listing the warnings; nothing when there are none. */
export function WarningBanner({ warnings }: { warnings: string[] }) {
  if (!warnings.length) return null;
  return (
    <div class="warning-banner" role="alert" data-testid="config-warnings">
      <Icon name="warning" class="warn-icon" />
      <div>
        <strong>{warnings.length === 1 ? 'Warning' : `${warnings.length} warnings`}</strong>
        <ul>
          {warnings.map((w, i) => (
            <li key={i}>{w}</li>
          ))}
        </ul>
      </div>
    </div>
  );
}

/** The banner for pages that do not poll the status themselves: loaded on mount, after each config save, and every minute. */
export function StatusWarnings() {
  const { config } = useServerConfig();
  const { data } = usePoll(() => admin.status(), 60_000, [config]);
  return <WarningBanner warnings={warningsOf(data)} />;
}
