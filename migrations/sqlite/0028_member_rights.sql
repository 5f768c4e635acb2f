-- Members and organizations get rights of their own. A token that held every right keeps
-- every right: it gains the new `members` and `organizations` rights. A narrowed token gains
-- none, so it can no longer reach member or organization routes it never held a right for.
UPDATE api_tokens
    SET rights = substr(rights, 1, length(rights) - 1) || ',{"resource":"members","action":"read"},{"resource":"members","action":"write"},{"resource":"organizations","action":"read"},{"resource":"organizations","action":"write"}]'
    WHERE (SELECT count(DISTINCT value) FROM json_each(api_tokens.rights)) = 18;
