-- class: expand
-- ?status= lists read that status's newest rows; a disconnect's ON DELETE SET NULL (and the waiting
-- pushes it moves) finds the open pushes that still reference the connection.
CREATE INDEX CONCURRENTLY IF NOT EXISTS "invoice_pushes_org_status_created_idx" ON "invoice_pushes" USING btree ("organization_id","status","created_at","id");--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "invoice_pushes_connection_idx" ON "invoice_pushes" USING btree ("connection_id") WHERE "invoice_pushes"."connection_id" is not null;
