-- class: expand
-- Nullable, no default: nothing is rewritten. The previous release leaves it null; the byte quota
-- reads such a row's stored payload size instead.
ALTER TABLE "invoice_pushes" ADD COLUMN "payload_bytes" integer;
