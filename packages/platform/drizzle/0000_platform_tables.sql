-- hand-written:
-- Databases an app built before the platform migrated its own tables already have them (an app's
-- migrations created them, and the previous release still writes them): created only where missing.
CREATE TABLE IF NOT EXISTS "health_heartbeat" (
	"instance_id" text PRIMARY KEY NOT NULL,
	"beat_at" timestamp with time zone DEFAULT now() NOT NULL,
	"beats" bigint DEFAULT 1 NOT NULL
);
--> statement-breakpoint
CREATE TABLE IF NOT EXISTS "tick_health" (
	"tick" text NOT NULL,
	"instance_id" text NOT NULL,
	"last_started_at" timestamp with time zone,
	"last_finished_at" timestamp with time zone,
	"last_success_at" timestamp with time zone,
	"last_failure_at" timestamp with time zone,
	"consecutive_failures" integer DEFAULT 0 NOT NULL,
	"last_error_code" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "tick_health_pkey" PRIMARY KEY("tick","instance_id")
);
