ALTER TABLE "xero_app_limits" ADD COLUMN "budget_minute" timestamp with time zone[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_slots" timestamp with time zone[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_minute" timestamp with time zone[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "budget_day" timestamp with time zone[] DEFAULT '{}' NOT NULL;--> statement-breakpoint
CREATE INDEX "invoice_pushes_connection_due_idx" ON "invoice_pushes" USING btree ("connection_id","next_attempt_at") WHERE "invoice_pushes"."status" in ('queued', 'failed');--> statement-breakpoint
-- Hand-written (issue 13): the app-wide row every claim locks first, so budget statements on several
-- connection rows never deadlock, and the array helpers the budget statements share.
INSERT INTO "xero_app_limits" ("id") VALUES ('app') ON CONFLICT ("id") DO NOTHING;--> statement-breakpoint
CREATE OR REPLACE FUNCTION xero_budget_live(stamps timestamptz[], since timestamptz) RETURNS timestamptz[]
	LANGUAGE sql IMMUTABLE AS $$ SELECT coalesce(array_agg(s ORDER BY s), '{}') FROM unnest(stamps) AS s WHERE s > since $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION xero_budget_add(stamps timestamptz[], at timestamptz, n integer) RETURNS timestamptz[]
	LANGUAGE sql IMMUTABLE AS $$ SELECT CASE WHEN n > 0 THEN stamps || array_fill(at, ARRAY[n]) ELSE stamps END $$;--> statement-breakpoint
CREATE OR REPLACE FUNCTION xero_budget_remove(stamps timestamptz[], stamp_us bigint, n integer) RETURNS timestamptz[]
	LANGUAGE sql IMMUTABLE AS $$
	SELECT coalesce(array_agg(s ORDER BY s), '{}') FROM (
		SELECT s, row_number() OVER (PARTITION BY (extract(epoch FROM s) * 1000000)::bigint = stamp_us) AS k
		FROM unnest(stamps) AS s) t
	WHERE (extract(epoch FROM s) * 1000000)::bigint <> stamp_us OR k > n $$;
