CREATE TABLE "connect_links" (
	"link_hash" text PRIMARY KEY NOT NULL,
	"organization_id" uuid NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "oauth_states" ADD COLUMN "browser_hash" text;--> statement-breakpoint
ALTER TABLE "oauth_states" ADD COLUMN "code_verifier_enc" text;--> statement-breakpoint
ALTER TABLE "connect_links" ADD CONSTRAINT "connect_links_organization_id_organizations_id_fk" FOREIGN KEY ("organization_id") REFERENCES "public"."organizations"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "connect_links_org_idx" ON "connect_links" USING btree ("organization_id","expires_at");