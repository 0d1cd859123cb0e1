ALTER TABLE "xero_grants" ADD COLUMN "refresh_error" text;--> statement-breakpoint
ALTER TABLE "xero_grants" ADD COLUMN "refresh_failures" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_grants" ADD COLUMN "refresh_retry_at" timestamp with time zone;