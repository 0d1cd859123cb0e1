ALTER TABLE "invoice_pushes" ADD COLUMN "xero_key_generation" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "xero_key_sent_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "xero_in_doubt" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "xero_marker" text;--> statement-breakpoint
-- hand-written:
-- Pushes the previous release attempted carry no record of their sends: in doubt, first sent no earlier
-- than they were created (so their key looks older than it is, and is looked up rather than resent late).
UPDATE "invoice_pushes" SET "xero_in_doubt" = true, "xero_key_sent_at" = "created_at"
WHERE "status" IN ('queued', 'failed', 'awaiting_connection') AND "attempts" > 0 AND "xero_key_sent_at" IS NULL;
