-- class: expand
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_deliveries_endpoint_log_idx" ON "webhook_deliveries" USING btree ("endpoint_id","created_at","id");--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_deliveries_endpoint_due_idx" ON "webhook_deliveries" USING btree ("endpoint_id","next_attempt_at") WHERE "webhook_deliveries"."status" in ('pending', 'failed');--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_deliveries_settled_idx" ON "webhook_deliveries" USING btree ("created_at") WHERE "webhook_deliveries"."status" in ('delivered', 'dead');--> statement-breakpoint
CREATE INDEX CONCURRENTLY IF NOT EXISTS "webhook_events_created_idx" ON "webhook_events" USING btree ("created_at");