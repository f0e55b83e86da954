-- depends on: nothing
-- Facts about the warehouse itself, e.g. the digest of the SQL tree its views were built from.
CREATE TABLE IF NOT EXISTS warehouse_meta (
    key VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
