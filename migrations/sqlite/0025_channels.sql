-- Channels: a Bot connected to Slack or Telegram. A Channel's secrets (bot token, signing
-- secret or secret token) are one sealed record. Each platform conversation maps to one Chat;
-- each input is one row, taken once per platform event ID, that also saves its reply's send.

CREATE TABLE channels (
    id                   BLOB PRIMARY KEY,
    organization_id      BLOB NOT NULL,
    member_id            BLOB NOT NULL,
    credential           TEXT NOT NULL,
    bot_id               BLOB NOT NULL,
    kind                 TEXT NOT NULL,
    status               TEXT NOT NULL,
    api_base_url         TEXT NOT NULL,
    secret_record        BLOB NOT NULL,
    removal_execution_id BLOB,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);
CREATE INDEX channels_member ON channels (member_id, id);

CREATE TABLE channel_chats (
    channel_id   BLOB NOT NULL REFERENCES channels (id),
    conversation TEXT NOT NULL,
    chat_id      BLOB NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (channel_id, conversation)
);

-- stage: received (no Turn yet), answering (its Turn runs), sending (a reply to send),
-- writing (a request is on its way: found so after a crash, its outcome is unknown), ended.
CREATE TABLE channel_messages (
    id                  BLOB PRIMARY KEY,
    channel_id          BLOB NOT NULL REFERENCES channels (id),
    event_id            TEXT NOT NULL,
    conversation        TEXT NOT NULL,
    reply_to            TEXT NOT NULL,
    reply_thread        TEXT,
    speaker_user_id     TEXT NOT NULL,
    speaker_name        TEXT,
    speaker_member_id   BLOB,
    text_record         BLOB NOT NULL,
    chat_id             BLOB,
    turn_id             BLOB,
    stage               TEXT NOT NULL,
    send_state          TEXT NOT NULL,
    reply_record        BLOB,
    platform_message_id TEXT,
    error               TEXT,
    attempts            INTEGER NOT NULL DEFAULT 0,
    retry_at            INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
-- An input is taken once per platform event.
CREATE UNIQUE INDEX channel_messages_event ON channel_messages (channel_id, event_id);
CREATE INDEX channel_messages_open ON channel_messages (channel_id, stage);

-- An outside user linked to a member of the Channel's organization; inputs taken after the
-- link keep the member with their Speaker.
CREATE TABLE channel_speakers (
    channel_id BLOB NOT NULL REFERENCES channels (id),
    user_id    TEXT NOT NULL,
    member_id  BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (channel_id, user_id)
);
