-- class: expand
CREATE TABLE "platform_releases" (
	"release_id" text PRIMARY KEY NOT NULL,
	"runtime" text NOT NULL,
	"migration_at" bigint NOT NULL,
	"needs" jsonb NOT NULL,
	"first_seen_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_seen_at" timestamp with time zone DEFAULT now() NOT NULL
);
