// A real OAuth 2.1 authorization server (npm oidc-provider) and a small protected resource
// for the OAuth tests, both on 127.0.0.1. The tests start it with NODE_PATH pointing at the
// folder scripts/oauth-deps installs into, and read one JSON line from stdout:
//   {"issuer": "...", "resource": "...", "resource_base": "..."}
//
// The provider does RFC 8414 metadata, RFC 7591 registration, PKCE, RFC 8707 resource
// indicators, refresh token rotation and RFC 7009 revocation. Environment:
//   NO_REVOCATION=1   no revocation endpoint (the provider advertises none)
//   ACCESS_TTL=N      access token lifetime in seconds (default 3600)
//   MCP_UPSTREAM=URL  make /mcp an OAuth-protected MCP server: a request with a valid token is
//                     passed on to this streamable-HTTP MCP server (say npm
//                     @modelcontextprotocol/server-everything on PORT, path /mcp), its
//                     answer (SSE included) streamed back
//   LOSE_TOKEN_ANSWERS=1  the token endpoint grants, then cuts the connection before its
//                     answer is written (an answer lost on the way back)
//
// The resource server (a second port) answers like an OAuth-protected MCP server:
//   GET /mcp                                        401 with WWW-Authenticate resource_metadata,
//                                                   200 {"sub": ...} with a valid bearer token
//   GET /.well-known/oauth-protected-resource/mcp   RFC 9728 metadata (also without the suffix)
//   GET /internal/mcp                               401 whose metadata names an internal issuer
//   POST /browser {"url"}                           the browser step: follows the authorization
//                                                   URL with a cookie jar, logs the test account
//                                                   in, consents, and answers {"location"}
//   GET /token-state?token=T                        {"active": bool} for an access or refresh token
//   GET /token-requests                             {"count": N}: token requests received
//   GET /resource-requests                          {"count": N}: requests to /mcp and its metadata
import http from 'node:http';
import Provider, { errors } from 'oidc-provider';

const ACCESS_TTL = Number(process.env.ACCESS_TTL || 3600);
const NO_REVOCATION = process.env.NO_REVOCATION === '1';
const MCP_UPSTREAM = process.env.MCP_UPSTREAM;
const LOSE_TOKEN_ANSWERS = process.env.LOSE_TOKEN_ANSWERS === '1';
let tokenRequests = 0;
let resourceRequests = 0;

function listen(server) {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server.address().port)));
}

const resourceServer = http.createServer();
const resourcePort = await listen(resourceServer);
const resourceBase = `http://127.0.0.1:${resourcePort}`;
const RESOURCE = `${resourceBase}/mcp`;

const providerServer = http.createServer();
const providerPort = await listen(providerServer);
const issuer = `http://127.0.0.1:${providerPort}`;

const provider = new Provider(issuer, {
  clients: [],
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    revocation: { enabled: !NO_REVOCATION },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (_ctx, _client, oneOf) => oneOf ?? RESOURCE,
      useGrantedResource: async () => true,
      getResourceServerInfo: async (_ctx, indicator) => {
        if (indicator !== RESOURCE) throw new errors.InvalidTarget();
        return { scope: 'mcp', audience: RESOURCE, accessTokenTTL: ACCESS_TTL, accessTokenFormat: 'opaque' };
      },
    },
  },
  scopes: ['openid', 'offline_access', 'mcp'],
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  pkce: { required: () => true },
  ttl: { AccessToken: ACCESS_TTL, RefreshToken: 86400, Grant: 86400, Interaction: 600, Session: 86400 },
  cookies: { keys: ['openbot-oauth-tests'] },
});
provider.proxy = false;

// Counts token requests; with LOSE_TOKEN_ANSWERS the granted answer never leaves.
provider.use(async (ctx, next) => {
  await next();
  if (ctx.path !== '/token') return;
  tokenRequests += 1;
  if (LOSE_TOKEN_ANSWERS && ctx.status === 200) ctx.req.socket.destroy();
});

// The test account logs in and consents to whatever was asked, without a page.
provider.use(async (ctx, next) => {
  if (!ctx.path.startsWith('/interaction/')) return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  let result;
  if (details.prompt.name === 'login') {
    result = { login: { accountId: 'test-user' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    const missing = details.prompt.details;
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  const to = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false });
  ctx.status = 303;
  ctx.set('location', to);
});
providerServer.on('request', provider.callback());

function json(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString() || '{}');
}

// Follows redirects on the provider with a cookie jar until one leaves it.
async function browse(start) {
  const jar = new Map();
  let url = start;
  for (let i = 0; i < 20; i += 1) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const line of res.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    const location = res.headers.get('location');
    if (!location) return { status: res.status, body: await res.text() };
    const next = new URL(location, url).toString();
    if (!next.startsWith(issuer)) return { location: next };
    url = next;
  }
  return { error: 'too many redirects' };
}

// Passes an authorized request on to the MCP server, without its token.
function forward(req, res) {
  const target = new URL(MCP_UPSTREAM);
  const headers = { ...req.headers, host: target.host };
  delete headers.authorization;
  const upstream = http.request(target, { method: req.method, headers }, (answer) => {
    res.writeHead(answer.statusCode, answer.headers);
    answer.pipe(res);
  });
  upstream.on('error', () => json(res, 502, { error: 'upstream_unreachable' }));
  req.pipe(upstream);
}

resourceServer.on('request', async (req, res) => {
  try {
    const url = new URL(req.url, resourceBase);
    const metadata = `${resourceBase}/.well-known/oauth-protected-resource/mcp`;
    if (url.pathname === '/mcp' || url.pathname.startsWith('/.well-known/oauth-protected-resource')) {
      resourceRequests += 1;
    }
    if (url.pathname === '/resource-requests') {
      return json(res, 200, { count: resourceRequests });
    }
    if (url.pathname === '/.well-known/oauth-protected-resource/mcp'
        || url.pathname === '/.well-known/oauth-protected-resource') {
      return json(res, 200, { resource: RESOURCE, authorization_servers: [issuer], scopes_supported: ['mcp'], bearer_methods_supported: ['header'] });
    }
    if (url.pathname === '/.well-known/oauth-protected-resource/internal/mcp') {
      return json(res, 200, { resource: `${resourceBase}/internal/mcp`, authorization_servers: ['http://169.254.169.254/'] });
    }
    if (url.pathname === '/internal/mcp') {
      return json(res, 401, { error: 'invalid_token' }, {
        'www-authenticate': `Bearer resource_metadata="${resourceBase}/.well-known/oauth-protected-resource/internal/mcp"`,
      });
    }
    if (url.pathname === '/mcp') {
      const auth = req.headers.authorization || '';
      const token = auth.startsWith('Bearer ') ? await provider.AccessToken.find(auth.slice(7)) : undefined;
      if (!token || token.isExpired || token.aud !== RESOURCE) {
        return json(res, 401, { error: 'invalid_token' }, {
          'www-authenticate': `Bearer error="invalid_token", resource_metadata="${metadata}", scope="mcp"`,
        });
      }
      if (MCP_UPSTREAM) return forward(req, res);
      return json(res, 200, { sub: token.accountId, scope: token.scope });
    }
    if (url.pathname === '/browser' && req.method === 'POST') {
      return json(res, 200, await browse((await body(req)).url));
    }
    if (url.pathname === '/token-requests') {
      return json(res, 200, { count: tokenRequests });
    }
    if (url.pathname === '/token-state') {
      const value = url.searchParams.get('token');
      const found = (await provider.AccessToken.find(value)) || (await provider.RefreshToken.find(value));
      return json(res, 200, { active: Boolean(found && !found.isExpired && !found.consumed) });
    }
    return json(res, 404, { error: 'not_found' });
  } catch (err) {
    return json(res, 500, { error: String(err && err.message) });
  }
});

process.stdout.write(`${JSON.stringify({ issuer, resource: RESOURCE, resource_base: resourceBase })}\n`);
