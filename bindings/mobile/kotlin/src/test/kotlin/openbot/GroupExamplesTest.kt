package openbot

import kotlinx.coroutines.flow.toList
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.EnumSource
import uniffi.openbot.*
import uniffi.openbot.schema.OpenBotException
import uniffi.openbot.schema.AcceptInvitation
import uniffi.openbot.schema.AppAuthKind
import uniffi.openbot.schema.AppConnectionStatus
import uniffi.openbot.schema.AppTransport
import uniffi.openbot.schema.ChannelKind
import uniffi.openbot.schema.CodeRun
import uniffi.openbot.schema.CreateChannel
import uniffi.openbot.schema.CreateMemory
import uniffi.openbot.schema.CreateTrigger
import uniffi.openbot.schema.CreateVaultItem
import uniffi.openbot.schema.CreateVaultRule
import uniffi.openbot.schema.MemorySearch
import uniffi.openbot.schema.MemoryUpdate
import uniffi.openbot.schema.NewApp
import uniffi.openbot.schema.NewAppConnection
import uniffi.openbot.schema.PutFileRetention
import uniffi.openbot.schema.PutVaultField
import uniffi.openbot.schema.TriggerKind
import uniffi.openbot.schema.TriggerState
import uniffi.openbot.schema.VaultOwner
import uniffi.openbot.schema.VaultReader
import uniffi.openbot.schema.Action
import uniffi.openbot.schema.BotSpec
import uniffi.openbot.schema.BotUpdate
import uniffi.openbot.schema.CreateApprovalRule
import uniffi.openbot.schema.CreateInvitation
import uniffi.openbot.schema.CreateOrganization
import uniffi.openbot.schema.CreateToken
import uniffi.openbot.schema.ExecutionState
import uniffi.openbot.schema.Limits
import uniffi.openbot.schema.MemberRole
import uniffi.openbot.schema.PutBudget
import uniffi.openbot.schema.PutDelegateTool
import uniffi.openbot.schema.PutHttpTool
import uniffi.openbot.schema.PutProvider
import uniffi.openbot.schema.Resource
import uniffi.openbot.schema.Right
import uniffi.openbot.schema.RuleAction
import uniffi.openbot.schema.TurnOutcome

/**
 * The examples of docs/sdk-kotlin.md, "Every operation, by group", as written there, in both
 * modes. An operation only a server has fails in memory with `InvalidInput` that says so: the
 * examples of those groups must work against `openbot serve` and fail just so in memory.
 */
class GroupExamplesTest {
    /** Runs a server-only example: it must work on a server and be `InvalidInput` in memory. */
    private suspend fun serverOnly(mode: Mode, example: suspend () -> Unit) {
        if (mode == Mode.REMOTE) return example()
        val e = expectError { example() }
        assertTrue(e is OpenBotException.InvalidInput, e.toString())
        assertTrue(e.errorReason().contains("server"), e.errorReason())
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `bots`(mode: Mode) = withClient(mode) { client ->
        val spec = BotSpec(name = "Helper", model = scriptedModel("""{"steps":[{"text":"Hi!"}]}"""),
                           instructions = "Help.", limits = Limits(maxSteps = 5u))
        val bot = client.createBot(spec)
        val renamed = client.updateBot(bot.id, BotUpdate(revision = bot.revision, name = "Helper 2"))
        println(client.listBotsFlow().toList().map { it.spec.name })          // [..., Helper 2]
        check(client.getBot(bot.id) == renamed)
        client.deleteBot(bot.id)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `chats`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBotHandle(BotSpec(name = "Chatty", model = scriptedModel("""{"steps":[{"text":"Hello!"}],"repeat":true}""")))
        val chat = bot.createChat()                              // flat: client.createChat(bot.id)
        val end = chat.send("Hi").wait()                         // flat: client.send(chat.id, textInput("Hi"))
        println("${end.outcome}: ${end.text}")                   // COMPLETED: Hello!
        println(chat.history().size)                             // 2
        println(client.planMode(chat.id))                        // false
        assertEquals(TurnOutcome.COMPLETED, end.outcome)
        assertEquals("Hello!", end.text)
        serverOnly(mode) {
            println(client.listChatsFlow().toList().size)                     // the caller's Chats
        }
        chat.delete()
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `executions`(mode: Mode) = withClient(mode) { client ->
        val script = """{"steps":[{"deltas":["a","b","c"],"delay_ms":50}]}"""
        val bot = client.createBotHandle(BotSpec(name = "Runner", model = scriptedModel(script)))
        val turn = bot.createChat().send("Go")
        serverOnly(mode) {
            println(client.pauseExecution(turn.executionId).state)   // WAITING: sends nothing new
            client.resumeExecution(turn.executionId)
        }
        val types = turn.events().toList().map { it.eventType }  // flat: client.observe(id, after)
        println(types.last())                                    // turn_ended
        val execution = client.getExecution(turn.executionId)
        println("${execution.state} ${execution.lastSequence}")  // COMPLETED 6
        assertEquals("turn_ended", types.last())
        assertEquals(ExecutionState.COMPLETED, execution.state)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `approvals`(mode: Mode) = withClient(mode) { client ->
        println(client.listApprovalsFlow().toList().size)                     // in memory: 0, nothing asks
        serverOnly(mode) {
            val rule = client.createRule(CreateApprovalRule(tool = "wire_money", action = RuleAction.ASK))
            println(client.listRulesFlow().toList().map { "${it.tool} ${it.action}" })   // [wire_money ASK]
            client.deleteRule(rule.id)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `outcomes`(mode: Mode) = withClient(mode) { client ->
        client.listUnknownOutcomesFlow(limit = 50u).collect { waiting ->
            println("${waiting.executionId} waits since ${waiting.waitingSince}")
            client.decideOutcome(waiting.executionId, waiting.call, uniffi.openbot.schema.OutcomeDecision.NOT_APPLIED)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `tokens`(mode: Mode) = withClient(mode) { client ->
        serverOnly(mode) {
            val created = client.createToken(CreateToken(name = "ci", rights = listOf(Right(Resource.BOTS, Action.READ))))
            println(created.secret.isNotEmpty())                 // true: shown in this answer only
            println(client.listTokensFlow().toList().map { it.name })         // [ci, ...]
            client.revokeToken(created.token.id)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `organizations, members and invitations`(mode: Mode) = withClient(mode) { client ->
        serverOnly(mode) {
            val invited = client.createInvitation(CreateInvitation(email = "ada-$mode@example.com", role = MemberRole.MEMBER))
            val accepted = client.acceptInvitation(AcceptInvitation(secret = invited.secret))
            println(client.listMembersFlow().toList().any { it.id == accepted.memberId })   // true
            client.removeMember(accepted.memberId)
            val other = client.createInvitation(CreateInvitation(email = "bob-$mode@example.com", role = MemberRole.ADMIN))
            client.revokeInvitation(other.invitation.id)
            println(client.listInvitationsFlow().toList().single { it.id == other.invitation.id }.revokedAt != null)   // true
            val org = client.createOrganization(CreateOrganization(name = "Lab"))
            println(client.listOrganizationsFlow().toList().map { it.name }.contains(org.organization.name))   // true
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `models`(mode: Mode) = withClient(mode) { client ->
        serverOnly(mode) {
            client.putProvider("compatible", PutProvider(apiKey = "sk-test", baseUrl = "https://llm.example.com/v1"))
            println(client.listProvidersFlow().toList().map { "${it.kind} ${it.hasKey}" })  // [compatible true]
            client.deleteProvider("compatible")
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `budgets`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBot(BotSpec(name = "Thrifty", model = scriptedModel("""{"steps":[]}""")))
        serverOnly(mode) {
            client.putBudget("bot", bot.id, PutBudget(maxCostMicros = 5_000_000u))   // 5 USD
            println(client.listBudgetsFlow().toList().map { "${it.scope} ${it.spentMicros}/${it.maxCostMicros}" })
            client.deleteBudget("bot", bot.id)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `tools`(mode: Mode) = withClient(mode) { client ->
        val helper = client.createBot(BotSpec(name = "Researcher", model = scriptedModel("""{"steps":[]}""")))
        // Both modes: memory:// keeps the registry in the process.
        client.putTool("lookup", PutHttpTool(description = "Looks a word up.", inputSchema = OBJECT_SCHEMA,
                                             url = "https://dictionary.example.com/lookup", retrySafe = true))
        client.putDelegate("research", PutDelegateTool(description = "Researches a topic.", botId = helper.id,
                                                       limits = Limits(maxSteps = 10u)))
        val names = client.listToolsFlow().toList().map { it.name } + client.listDelegatesFlow().toList().map { it.name }
        println(names)   // [lookup, research]
        assertTrue(names.containsAll(listOf("lookup", "research")), names.toString())
        client.deleteTool("lookup")
        client.deleteDelegate("research")
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `files`(mode: Mode) = withClient(mode) { client ->
        // Both modes: memory:// keeps the bytes in the process.
        val file = client.uploadFile("notes.txt", "remember the milk".toByteArray(), "text/plain")
        val content = client.fileContent(file.id)
        println("${file.size} ${content.contentType} ${content.data.decodeToString()}")   // 17 text/plain remember the milk
        println(client.listFilesFlow().toList().any { it.id == file.id })   // true
        client.deleteFile(file.id)
        assertEquals("remember the milk", content.data.decodeToString())
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `memories`(mode: Mode) = withClient(mode) { client ->
        // Both modes: memory:// keeps a Bot's memories in the process.
        val bot = client.createBot(BotSpec(name = "Remembers", model = scriptedModel("""{"steps":[]}""")))
        val memory = client.createMemory(bot.id, CreateMemory(content = "The team meets on Tuesdays at 10.", tags = listOf("schedule")))
        val found = client.searchMemories(bot.id, MemorySearch(query = "team meeting day"))
        println(found.items.map { it.memory.content })          // [The team meets on Tuesdays at 10.]
        assertEquals(listOf(memory.id), found.items.map { it.memory.id })
        client.updateMemory(bot.id, memory.id, MemoryUpdate(tags = listOf("schedule", "team")))   // the ciphertext stays
        assertEquals(listOf(memory.id), client.listMemoriesFlow(bot.id, tag = "team").toList().map { it.id })
        client.deleteMemory(bot.id, memory.id)
        client.deleteBot(bot.id)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `apps`(mode: Mode) = withClient(mode) { client ->
        // Both modes; discoverAppTools(app.id, connection.id) lists the tools once the server is reachable.
        val app = client.registerApp(NewApp(name = "crm-${ProcessHandle.current().pid()}-${mode.name.lowercase()}",
                                            transport = AppTransport.Http(url = "https://mcp.example.com/mcp")))
        val connection = client.openAppConnection(app.id, NewAppConnection(auth = AppAuthKind.MANUAL,
                                                                           headers = mapOf("Authorization" to "Bearer example-token")))
        println("${connection.auth} ${connection.status} ${connection.headerNames.size}")   // MANUAL READY 1
        assertEquals(AppConnectionStatus.READY, connection.status)
        assertTrue(client.listAppConnectionsFlow(app.id).toList().any { it.id == connection.id })
        client.removeApp(app.id)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `vaults, code mode, triggers, reminders, channels and file retention`(mode: Mode) = withClient(mode) { client ->
        val bot = client.createBot(BotSpec(name = "Scheduled", model = scriptedModel("""{"steps":[]}""")))
        val chat = client.createChat(bot.id)
        // Code Mode (both modes): a program against the Bot's tools, with no model
        val run = client.runCode(bot.id, CodeRun(code = "console.log(\"doubling\"); return [1, 2, 3].map((x) => x * 2);"))
        println("${run.ok} ${run.value} ${run.console.size}")   // true [2,4,6] 1
        assertEquals("[2,4,6]", run.value)
        serverOnly(mode) {
            // Vaults: a field is opened only in the send of a tool whose header names it
            val item = client.createVaultItem(CreateVaultItem(name = "crm", owner = VaultOwner.MEMBER,
                                                              fields = mapOf("api_key" to "sk-live-example")))
            client.putVaultField(item.id, "region", PutVaultField(value = "eu"))
            client.putTool("crm_lookup", PutHttpTool(description = "Finds a customer.", inputSchema = OBJECT_SCHEMA,
                                                     url = "https://crm.example.com/find",
                                                     headers = mapOf("Authorization" to "Bearer {{vault.${item.id}.api_key}}")))
            // A send reads as the Turn's Bot and as the tool: each needs a rule.
            client.createVaultRule(item.id, CreateVaultRule(field = "api_key", reader = VaultReader.Bot(botId = bot.id)))
            client.createVaultRule(item.id, CreateVaultRule(field = "api_key", reader = VaultReader.Tool(name = "crm_lookup")))
            println("${item.fields.map { it.name }} ${client.listVaultRulesFlow(item.id).toList().size}")   // [api_key] 2
            assertEquals(2, client.listVaultRulesFlow(item.id).toList().size)

            // Triggers and reminders
            val trigger = client.createTrigger(CreateTrigger(chatId = chat.id, kind = TriggerKind.SCHEDULE, cron = "0 9 * * MON-FRI",
                                                             timeZone = "Europe/Paris", text = "Post the stand-up summary.")).trigger
            println("${trigger.state} ${client.pauseTrigger(trigger.id).state} ${client.resumeTrigger(trigger.id).state}")   // ACTIVE PAUSED ACTIVE
            assertEquals(TriggerState.ACTIVE, client.getTrigger(trigger.id).state)
            val hook = client.createTrigger(CreateTrigger(chatId = chat.id, kind = TriggerKind.WEBHOOK, text = "A delivery arrived."))
            println("${hook.trigger.hookPath}: a secret of ${hook.signingSecret?.length} characters, shown once")
            println("${client.listFiringsFlow(trigger.id).toList().size} ${client.listRemindersFlow(chat.id).toList().size}")   // 0 0
            client.deleteTrigger(trigger.id)
            client.deleteTrigger(hook.trigger.id)

            // Channels: a Telegram bot answered by this Bot; its secrets are never shown again
            val channel = client.createChannel(CreateChannel(kind = ChannelKind.TELEGRAM, botId = bot.id,
                                                             botToken = "123456:ABC-example", secretToken = "a-long-random-secret"))
            println("${channel.webhookPath.endsWith("/telegram")} ${client.listChannelSendsFlow(channel.id).toList().size}")   // true 0
            assertEquals(0, client.listChannelSendsFlow(channel.id).toList().size)
            client.deleteChannel(channel.id)

            // File retention (owner or admin)
            println(client.putFileRetention(PutFileRetention(days = 30u)).days)   // 30
            assertEquals(30u, client.getFileRetention().days)
            client.deleteFileRetention()
            client.deleteTool("crm_lookup")
            client.deleteVaultItem(item.id)
        }
        client.deleteChat(chat.id)
        client.deleteBot(bot.id)
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `sessions`(mode: Mode) = withClient(mode) { client ->
        serverOnly(mode) {
            val session = client.createSession()                 // for a browser: an HttpOnly cookie
            println(session.expiresAt)
            // endSession ends the session of a cookie; a client with a token sends none.
            val e = expectError { client.endSession() }
            println(e.code)                                      // unauthorized
            assertEquals("unauthorized", e.code)
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Mode::class)
    fun `node`(mode: Mode) = withClient(mode) { client ->
        serverOnly(mode) {
            println(client.health().status)                      // ok (needs no token)
        }
    }
}
