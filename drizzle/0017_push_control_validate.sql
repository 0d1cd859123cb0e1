-- class: expand
ALTER TABLE "invoice_pushes" VALIDATE CONSTRAINT "invoice_pushes_status_check";