-- class: expand
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_deliveries_endpoint_log_idx" ON "webhook_deliveries" USING btree ("endpoint_id","created_at","id");--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_deliveries_leased_idx" ON "webhook_deliveries" USING btree ("endpoint_id") WHERE "webhook_deliveries"."lease_expires_at" IS NOT NULL;--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_deliveries_settled_idx" ON "webhook_deliveries" USING btree ("updated_at") WHERE "webhook_deliveries"."status" in ('delivered', 'dead');--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_events_created_idx" ON "webhook_events" USING btree ("created_at");