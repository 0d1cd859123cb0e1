ALTER TABLE "invoice_pushes" ADD COLUMN "xero_key_generation" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "xero_key_sent_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "xero_in_doubt" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "xero_marker" text;