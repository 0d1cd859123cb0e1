ALTER TABLE "xero_app_limits" ADD COLUMN "budget_minute_counts" integer[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_app_limits" ADD COLUMN "budget_minute_at" bigint;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_minute_counts" integer[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_minute_at" bigint;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_day_counts" integer[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_day_at" bigint;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_served_at" timestamp with time zone;--> statement-breakpoint
CREATE INDEX "invoice_pushes_settled_idx" ON "invoice_pushes" USING btree ("created_at") WHERE "invoice_pushes"."status" in ('pushed', 'dead');--> statement-breakpoint
-- hand-written:
-- (issue 23) The bounded budget's helpers (docs/xero-budget.md): a window is counted in fixed
-- sub-windows, `counts` oldest first, the newest being sub-window number `at`. The old xero_budget_*
-- functions and timestamp arrays stay: the previous release still reads and writes them.
CREATE OR REPLACE FUNCTION xero_window_used(counts integer[], at bigint, now_at bigint) RETURNS integer
	LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN at IS NULL OR now_at - at >= cardinality(counts) THEN 0
		ELSE (SELECT coalesce(sum(x), 0)::int FROM unnest(counts[greatest(now_at - at, 0) + 1:]) AS x) END $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION xero_window_add(counts integer[], at bigint, now_at bigint, n integer, k integer)
	RETURNS integer[] LANGUAGE sql IMMUTABLE AS $$
	SELECT s[1:n - 1] || (s[n] + greatest(k, 0)) FROM (SELECT CASE
		WHEN at IS NULL OR now_at - at >= n OR cardinality(counts) <> n THEN array_fill(0, ARRAY[n])
		ELSE counts[greatest(now_at - at, 0) + 1:n] || array_fill(0, ARRAY[greatest(now_at - at, 0)::int]) END AS s) t $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION xero_window_remove(counts integer[], at bigint, sub_at bigint, k integer)
	RETURNS integer[] LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN at IS NULL OR k IS NULL OR k <= 0 OR i < 1 OR i > cardinality(counts) THEN counts
		ELSE counts[1:i - 1] || greatest(counts[i] - k, 0) || counts[i + 1:] END
	FROM (SELECT (cardinality(counts) - (at - sub_at))::int AS i) t $$;--> statement-breakpoint
-- Seed the sub-windows from the arrays the previous release counted in (Xero's real minute and day:
-- 63 one-second and 26 one-hour sub-windows, src/app/push/budget.ts).
CREATE OR REPLACE FUNCTION xero_window_seed(stamps timestamptz[], now_at bigint, sub_ms bigint, n integer)
	RETURNS integer[] LANGUAGE sql IMMUTABLE AS $$
	SELECT array_agg((SELECT count(*) FROM unnest(stamps) AS s
		WHERE floor(extract(epoch FROM s) * 1000 / sub_ms)::bigint = now_at - n + i)::int ORDER BY i)
	FROM generate_series(1, n) AS i $$;--> statement-breakpoint
UPDATE "xero_connections" SET
	"budget_minute_counts" = xero_window_seed("budget_minute", m.minute_at, 1000, 63), "budget_minute_at" = m.minute_at,
	"budget_day_counts" = xero_window_seed("budget_day", m.day_at, 3600000, 26), "budget_day_at" = m.day_at,
	"budget_served_at" = (SELECT max(s) FROM unnest("budget_minute") AS s)
FROM (SELECT floor(extract(epoch FROM now()) * 1000 / 1000)::bigint AS minute_at,
	floor(extract(epoch FROM now()) * 1000 / 3600000)::bigint AS day_at) m
WHERE "budget_minute_at" IS NULL AND (cardinality("budget_minute") > 0 OR cardinality("budget_day") > 0);--> statement-breakpoint
UPDATE "xero_app_limits" SET
	"budget_minute_counts" = xero_window_seed("budget_minute", m.minute_at, 1000, 63), "budget_minute_at" = m.minute_at
FROM (SELECT floor(extract(epoch FROM now()) * 1000 / 1000)::bigint AS minute_at) m
WHERE "budget_minute_at" IS NULL AND cardinality("budget_minute") > 0;
