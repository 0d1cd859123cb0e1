DROP INDEX "xero_connections_tenant_idx";--> statement-breakpoint
ALTER TABLE "invoice_pushes" ADD COLUMN "tenant_id" text;--> statement-breakpoint
ALTER TABLE "organizations" ADD COLUMN "default_connection_id" uuid;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD COLUMN "chosen" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "organizations" ADD CONSTRAINT "organizations_default_connection_id_xero_connections_id_fk" FOREIGN KEY ("default_connection_id") REFERENCES "public"."xero_connections"("id") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
-- hand-written:
-- Existing data sees no change: every existing connection counts as chosen, and each organization's
-- oldest active connection (where ingress sent its invoices until now) becomes its default. The
-- generated unique key on tenant_id is added last, here, after the duplicates below are settled: when
-- regenerating this file, drop drizzle-kit's ADD CONSTRAINT "xero_connections_tenant_unique" above.
UPDATE "xero_connections" SET "chosen" = true;--> statement-breakpoint
-- Pushes still to send remember the tenant they were routed to.
UPDATE "invoice_pushes" p SET "tenant_id" = c."tenant_id" FROM "xero_connections" c
  WHERE c."id" = p."connection_id" AND p."tenant_id" IS NULL
    AND p."status" IN ('queued', 'failed', 'awaiting_connection');--> statement-breakpoint
-- A tenant two organizations already hold (a race the old (organization_id, tenant_id) key allowed)
-- keeps one holder: the one that can push (active) first, then the oldest. The others' connection rows
-- go; their unsent pushes stay, waiting (awaiting_connection, their tenant kept, the reason in
-- last_error), never sent to the holder's books. Their grants go with their last tenant.
CREATE TEMPORARY TABLE "duplicate_holders" ON COMMIT DROP AS
  SELECT "id", "tenant_id" FROM (
    SELECT "id", "tenant_id", row_number() OVER (
      PARTITION BY "tenant_id" ORDER BY ("status" = 'active') DESC, "created_at", "id") AS r
    FROM "xero_connections") ranked
  WHERE r > 1;--> statement-breakpoint
UPDATE "invoice_pushes" p SET "status" = 'awaiting_connection', "connection_id" = NULL, "updated_at" = now(),
    "last_error" = 'Xero tenant ' || d."tenant_id" || ' is held by another organization: connect another tenant'
  FROM "duplicate_holders" d
  WHERE p."connection_id" = d."id" AND p."status" IN ('queued', 'failed', 'awaiting_connection');--> statement-breakpoint
WITH gone AS (
  DELETE FROM "xero_connections" c USING "duplicate_holders" d WHERE c."id" = d."id" RETURNING c."grant_id")
DELETE FROM "xero_grants" g WHERE g."id" IN (SELECT "grant_id" FROM gone)
  AND NOT EXISTS (SELECT 1 FROM "xero_connections" c
                  WHERE c."grant_id" = g."id" AND c."id" NOT IN (SELECT "id" FROM "duplicate_holders"));--> statement-breakpoint
DROP TABLE "duplicate_holders";--> statement-breakpoint
UPDATE "organizations" o SET "default_connection_id" = (
  SELECT c."id" FROM "xero_connections" c WHERE c."organization_id" = o."id" AND c."status" = 'active'
  ORDER BY c."created_at", c."id" LIMIT 1)
  WHERE o."default_connection_id" IS NULL;--> statement-breakpoint
ALTER TABLE "xero_connections" ADD CONSTRAINT "xero_connections_tenant_unique" UNIQUE("tenant_id");
