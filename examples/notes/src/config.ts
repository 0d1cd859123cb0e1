import { ConfigError, type Env } from '@honest-health/platform';

export interface NotesConfig {
  /** How often the count-words tick runs in a process; on Workers the cron trigger decides. */
  countWordsIntervalMs: number;
}

/** The app's own variables, read beside the platform's; a bad one fails boot with the platform's. */
export function loadNotesConfig(env: Env): NotesConfig {
  const raw = env.COUNT_WORDS_INTERVAL_MS || '60000';
  const ms = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(ms >= 100 && ms <= 86_400_000)) {
    throw new ConfigError(['COUNT_WORDS_INTERVAL_MS must be an integer from 100 to 86400000']);
  }
  return { countWordsIntervalMs: ms };
}
