-- OAuth setups belong to App Connections (docs/apps.md, "Connect with OAuth"): a foreign key
-- from oauth_connections, oauth_flows and oauth_grants to app_connections. App Connections are
-- never deleted (removing one marks it `removed` and hands its grant to the organization's
-- cleanup service in the same transaction), so the keys use the default NO ACTION: a delete
-- of a Connection that still has OAuth rows is refused rather than cascading them away. The
-- grant-use table (grant_uses) keeps no key to app_connections: its holders are Connections or
-- developer tests, and a cleanup row must outlive whatever it cleans up.
--
-- OAuth rows of no App Connection could only be made before sign-in began at an App (they
-- belong to no App and nothing can use them); they are dropped.

DELETE FROM oauth_flows WHERE connection_id NOT IN (SELECT id FROM app_connections);
DELETE FROM oauth_grants WHERE connection_id NOT IN (SELECT id FROM app_connections);
DELETE FROM oauth_connections WHERE connection_id NOT IN (SELECT id FROM app_connections);

ALTER TABLE oauth_connections ADD CONSTRAINT oauth_connections_app_connection
    FOREIGN KEY (connection_id) REFERENCES app_connections (id);
ALTER TABLE oauth_flows ADD CONSTRAINT oauth_flows_app_connection
    FOREIGN KEY (connection_id) REFERENCES app_connections (id);
ALTER TABLE oauth_grants ADD CONSTRAINT oauth_grants_app_connection
    FOREIGN KEY (connection_id) REFERENCES app_connections (id);
