-- class: expand
CREATE TABLE "invoice_push_retries" (
	"organization_id" uuid NOT NULL,
	"idempotency_key" text NOT NULL,
	"push_id" uuid NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "invoice_push_retries_organization_id_idempotency_key_pk" PRIMARY KEY("organization_id","idempotency_key")
);
--> statement-breakpoint
ALTER TABLE "invoice_pushes" DROP CONSTRAINT "invoice_pushes_status_check";--> statement-breakpoint
ALTER TABLE "invoice_push_retries" ADD CONSTRAINT "invoice_push_retries_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "invoice_push_retries" ADD CONSTRAINT "invoice_push_retries_push_id_invoice_pushes_id_fk" FOREIGN KEY ("push_id") REFERENCES "public"."invoice_pushes"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "invoice_push_retries_push_idx" ON "invoice_push_retries" USING btree ("push_id");--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD CONSTRAINT "invoice_pushes_status_check" CHECK ("invoice_pushes"."status" in ('queued', 'pushed', 'failed', 'dead', 'awaiting_connection', 'cancelled')) NOT VALID;