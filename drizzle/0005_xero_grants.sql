CREATE TABLE "xero_app_limits" (
	"id" text PRIMARY KEY NOT NULL,
	"app_min_remaining" integer,
	"paused_until" timestamp with time zone,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "xero_grants" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"auth_event_id" text,
	"scope" text,
	"access_token_enc" text,
	"refresh_token_enc" text NOT NULL,
	"seal_context" text,
	"access_expires_at" timestamp with time zone,
	"token_version" integer DEFAULT 1 NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"refresh_lease_owner" text,
	"refresh_lease_expires_at" timestamp with time zone,
	"refresh_started_at" timestamp with time zone,
	"refresh_started_version" integer,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "xero_grants_status_check" CHECK ("xero_grants"."status" in ('active', 'needs_reauth'))
);
--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "grant_id" uuid;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "xero_connection_id" text;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "status_reason" text;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "min_remaining" integer;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "day_remaining" integer;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "limits_seen_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "parked_until" timestamp with time zone;--> statement-breakpoint
-- Hand-written data migration (issue 12): every per-tenant token row becomes a grant of its own, with
-- the grant id equal to the connection id, and the connection points at it. Rows of one consent had
-- forked copies of the token chain, so none can be trusted to speak for another: one grant per row
-- keeps every connection working, and a reconnect merges them into one grant. The ciphertexts were
-- sealed under 'xero:<org>:<tenant>' (the keys are not in the database, so SQL cannot re-seal them):
-- seal_context keeps that until the grant's first refresh re-seals it under its own id.
INSERT INTO "xero_grants" ("id", "organization_id", "access_token_enc", "refresh_token_enc", "seal_context",
	"access_expires_at", "token_version", "status", "refresh_lease_owner", "refresh_lease_expires_at",
	"refresh_started_at", "refresh_started_version", "created_at", "updated_at")
SELECT "id", "organization_id", "access_token_enc", "refresh_token_enc",
	'xero:' || "organization_id" || ':' || "tenant_id", "access_expires_at", "token_version", "status",
	"refresh_lease_owner", "refresh_lease_expires_at", "refresh_started_at", "refresh_started_version",
	"created_at", "updated_at"
FROM "xero_connections";--> statement-breakpoint
UPDATE "xero_connections" SET "grant_id" = "id";--> statement-breakpoint
ALTER TABLE "xero_connections" ALTER COLUMN "grant_id" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "xero_grants" ADD CONSTRAINT "xero_grants_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD CONSTRAINT "xero_connections_grant_id_xero_grants_id_fk" FOREIGN KEY ("grant_id") REFERENCES "public"."xero_grants"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "xero_connections_grant_idx" ON "xero_connections" USING btree ("grant_id");--> statement-breakpoint
CREATE INDEX "xero_connections_tenant_idx" ON "xero_connections" USING btree ("tenant_id");--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "access_token_enc";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "refresh_token_enc";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "access_expires_at";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "token_version";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "refresh_lease_owner";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "refresh_lease_expires_at";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "refresh_started_at";--> statement-breakpoint
ALTER TABLE "xero_connections" DROP COLUMN "refresh_started_version";