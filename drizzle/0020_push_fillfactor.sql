-- class: expand
-- The claim's lease write (lease, attempts, the key's send time, marker) changes no indexed column: with
-- room left on the row's page it is a HOT update, one heap record instead of a new entry in each of
-- invoice_pushes' nine indexes. New pages keep half free for it; rows already stored keep their pages.
-- Only a storage parameter: no rewrite, and SHARE UPDATE EXCLUSIVE, which reads and writes pass.
ALTER TABLE "invoice_pushes" SET (fillfactor = 50);
