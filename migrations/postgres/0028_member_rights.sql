-- Members and organizations get rights of their own. A token that held every right keeps
-- every right: it gains the new `members` and `organizations` rights. A narrowed token gains
-- none, so it can no longer reach member or organization routes it never held a right for.
UPDATE api_tokens
    SET rights = (rights::jsonb || '[{"resource":"members","action":"read"},{"resource":"members","action":"write"},{"resource":"organizations","action":"read"},{"resource":"organizations","action":"write"}]'::jsonb)::text
    WHERE (SELECT count(DISTINCT e) FROM jsonb_array_elements(api_tokens.rights::jsonb) AS e) = 18;
