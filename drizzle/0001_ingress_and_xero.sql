CREATE TABLE "invoice_pushes" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"connection_id" uuid,
	"idempotency_key" text NOT NULL,
	"request_hash" text NOT NULL,
	"payload" jsonb NOT NULL,
	"status" text NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"lease_owner" text,
	"lease_expires_at" timestamp with time zone,
	"last_error" text,
	"xero_invoice_id" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "invoice_pushes_org_key_unique" UNIQUE("organization_id","idempotency_key"),
	CONSTRAINT "invoice_pushes_key_length_check" CHECK (char_length("invoice_pushes"."idempotency_key") between 1 and 128),
	CONSTRAINT "invoice_pushes_status_check" CHECK ("invoice_pushes"."status" in ('queued', 'pushed', 'failed', 'dead', 'awaiting_connection'))
);
--> statement-breakpoint
CREATE TABLE "xero_connections" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"tenant_id" text NOT NULL,
	"tenant_name" text,
	"access_token_enc" text,
	"refresh_token_enc" text NOT NULL,
	"access_expires_at" timestamp with time zone,
	"token_version" integer DEFAULT 1 NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"refresh_lease_owner" text,
	"refresh_lease_expires_at" timestamp with time zone,
	"refresh_started_at" timestamp with time zone,
	"refresh_started_version" integer,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "xero_connections_org_tenant_unique" UNIQUE("organization_id","tenant_id"),
	CONSTRAINT "xero_connections_status_check" CHECK ("xero_connections"."status" in ('active', 'needs_reauth'))
);
--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD CONSTRAINT "invoice_pushes_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD CONSTRAINT "invoice_pushes_connection_id_xero_connections_id_fk" FOREIGN KEY ("connection_id") REFERENCES "public"."xero_connections"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD CONSTRAINT "xero_connections_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "invoice_pushes_due_idx" ON "invoice_pushes" USING btree ("status","next_attempt_at");--> statement-breakpoint
CREATE INDEX "invoice_pushes_org_created_idx" ON "invoice_pushes" USING btree ("organization_id","created_at","id");