CREATE TABLE "api_keys" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"organization_id" uuid NOT NULL,
	"name" text DEFAULT 'default' NOT NULL,
	"key_hash" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	CONSTRAINT "api_keys_key_hash_unique" UNIQUE("key_hash")
);
--> statement-breakpoint
ALTER TABLE "organizations" ALTER COLUMN "api_key_hash" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "api_keys" ADD CONSTRAINT "api_keys_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "api_keys_org_idx" ON "api_keys" USING btree ("organization_id");--> statement-breakpoint
CREATE INDEX "invoice_pushes_org_pending_idx" ON "invoice_pushes" USING btree ("organization_id") WHERE "invoice_pushes"."status" in ('queued', 'failed', 'awaiting_connection');--> statement-breakpoint
-- hand-written:
-- Expand/contract: every existing key becomes a row of its own, and organizations.api_key_hash stays
-- (the previous release authenticates through it). A key the previous release creates during a
-- rolling deploy (org:create writes only organizations) gets its row from this trigger, so the new
-- release knows it too. A later release drops the trigger and the column.
CREATE OR REPLACE FUNCTION "api_key_from_organization"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW."api_key_hash" IS NOT NULL THEN
    INSERT INTO "api_keys" ("organization_id", "key_hash", "created_at")
    VALUES (NEW."id", NEW."api_key_hash", NEW."created_at")
    ON CONFLICT ("key_hash") DO NOTHING;
  END IF;
  RETURN NEW;
END
$$;--> statement-breakpoint
DROP TRIGGER IF EXISTS "organizations_api_key" ON "organizations";--> statement-breakpoint
CREATE TRIGGER "organizations_api_key" AFTER INSERT ON "organizations"
  FOR EACH ROW EXECUTE FUNCTION "api_key_from_organization"();--> statement-breakpoint
INSERT INTO "api_keys" ("organization_id", "key_hash", "created_at")
  SELECT "id", "api_key_hash", "created_at" FROM "organizations" WHERE "api_key_hash" IS NOT NULL
  ON CONFLICT ("key_hash") DO NOTHING;
