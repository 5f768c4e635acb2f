-- Channels: a Bot connected to Slack or Telegram. A Channel's secrets (bot token, signing
-- secret or secret token) are one sealed record. Each platform conversation maps to one Chat;
-- each input is one row, taken once per platform event ID, that also saves its reply's send.

CREATE TABLE channels (
    id                   UUID PRIMARY KEY,
    organization_id      UUID NOT NULL,
    member_id            UUID NOT NULL,
    credential           TEXT NOT NULL,
    bot_id               UUID NOT NULL,
    kind                 TEXT NOT NULL,
    status               TEXT NOT NULL,
    api_base_url         TEXT NOT NULL,
    secret_record        UUID NOT NULL,
    removal_execution_id UUID,
    created_at           BIGINT NOT NULL,
    updated_at           BIGINT NOT NULL
);
CREATE INDEX channels_member ON channels (member_id, id);

CREATE TABLE channel_chats (
    channel_id   UUID NOT NULL REFERENCES channels (id),
    conversation TEXT NOT NULL,
    chat_id      UUID NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (channel_id, conversation)
);

-- stage: received (no Turn yet), answering (its Turn runs), sending (a reply to send),
-- writing (a request is on its way: found so after a crash, its outcome is unknown), ended.
CREATE TABLE channel_messages (
    id                  UUID PRIMARY KEY,
    channel_id          UUID NOT NULL REFERENCES channels (id),
    event_id            TEXT NOT NULL,
    conversation        TEXT NOT NULL,
    reply_to            TEXT NOT NULL,
    reply_thread        TEXT,
    speaker_user_id     TEXT NOT NULL,
    speaker_name        TEXT,
    speaker_member_id   UUID,
    text_record         UUID NOT NULL,
    chat_id             UUID,
    turn_id             UUID,
    stage               TEXT NOT NULL,
    send_state          TEXT NOT NULL,
    reply_record        UUID,
    platform_message_id TEXT,
    error               TEXT,
    attempts            BIGINT NOT NULL DEFAULT 0,
    retry_at            BIGINT,
    created_at          BIGINT NOT NULL,
    updated_at          BIGINT NOT NULL
);
-- An input is taken once per platform event.
CREATE UNIQUE INDEX channel_messages_event ON channel_messages (channel_id, event_id);
CREATE INDEX channel_messages_open ON channel_messages (channel_id, stage);

-- An outside user linked to a member of the Channel's organization; inputs taken after the
-- link keep the member with their Speaker.
CREATE TABLE channel_speakers (
    channel_id UUID NOT NULL REFERENCES channels (id),
    user_id    TEXT NOT NULL,
    member_id  UUID NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, user_id)
);
