// The web console in a real browser: Debian's Chromium driven by playwright-core (no browser
// download), against the dev-server binary ($HANGAR_DEV_SERVER) on a free port with a fresh data
// directory, seeded through the API. It signs in, finds a module by search, opens it, reads its
// README and inputs, sees deprecated and revoked versions marked and an agent's status, signs out; it checks
// that a README's <script> and <img onerror> show as text and that nothing runs; and it writes
// screenshots of the main pages to docs/console/ (docs/console.md shows them).
//
// Run: HANGAR_DEV_SERVER=target/debug/dev-server node tests/web/console.mjs (tests/run does).

import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SHOTS = join(ROOT, 'docs', 'console');
const CHROMIUM = process.env.HANGAR_CHROMIUM || '/usr/bin/chromium';
const BROKER_TOKEN = 'console-test-root-token';
/// The whole run's bound: past it the test fails, whatever it was waiting for.
const TIME_LIMIT_MS = 240_000;

let passed = 0;
let server;
let browser;
const dataDir = mkdtempSync(join(tmpdir(), 'hangar-console-'));

const limit = setTimeout(() => finish(new Error(`the browser test took longer than ${TIME_LIMIT_MS / 1000} s`)), TIME_LIMIT_MS);

function check(condition, what) {
  if (!condition) throw new Error(`failed: ${what}`);
  passed += 1;
  console.log(`ok - ${what}`);
}

async function finish(error) {
  clearTimeout(limit);
  if (browser) await browser.close().catch(() => {});
  if (server) server.kill('SIGTERM');
  rmSync(dataDir, { recursive: true, force: true });
  if (error) {
    console.error(error.stack || String(error));
    console.log(`${passed} passed, 1 failed`);
    process.exit(1);
  }
  console.log(`${passed} passed, 0 failed`);
  process.exit(0);
}

// ----- dev-server -----

/// Starts dev-server and reads its address and generated site-admin token from its output.
function startServer() {
  const binary = process.env.HANGAR_DEV_SERVER;
  if (!binary) throw new Error('HANGAR_DEV_SERVER must name the dev-server binary (tests/run sets it)');
  server = spawn(binary, ['--listen', '127.0.0.1:0', '--data-dir', dataDir], {
    env: { ...process.env, RUST_LOG: 'warn', HANGAR_ROOT_SERVICE_TOKEN: BROKER_TOKEN },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let token;
    server.on('exit', (code) => reject(new Error(`dev-server exited (${code}) before it listened`)));
    createInterface({ input: server.stdout }).on('line', (line) => {
      if (line.startsWith('Site-admin token')) token = line.trim().split(' ').pop();
      if (line.startsWith('Hangar is listening on ')) resolve({ url: line.trim().split(' ').pop(), admin: token });
    });
  });
}

// ----- the API, to seed -----

async function api(base, method, path, token, body, headers = {}) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body ? { 'content-type': 'application/vnd.api+json' } : {}),
      ...headers,
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  const json = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
  return json;
}

/// A gzip-compressed tar archive (ustar) of `files`: name -> text.
function targz(files) {
  const blocks = [];
  for (const [name, text] of Object.entries(files)) {
    const data = Buffer.from(text);
    const header = Buffer.alloc(512);
    header.write(name, 0, 100);
    header.write('0000644\0', 100);
    header.write('0000000\0', 108);
    header.write('0000000\0', 116);
    header.write(`${data.length.toString(8).padStart(11, '0')}\0`, 124);
    header.write(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136);
    header.write('        ', 148);
    header.write('0', 156);
    header.write('ustar\0', 257);
    header.write('00', 263);
    const sum = header.reduce((total, byte) => total + byte, 0);
    header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    blocks.push(header, data, Buffer.alloc((512 - (data.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  return gzipSync(Buffer.concat(blocks));
}

/// Publishes version `version` of acme's module `name`/`provider` made of `files`, and waits
/// (bounded) for ingest to settle it.
async function publish(base, token, name, provider, version, files) {
  const modules = '/api/v2/organizations/acme/registry-modules';
  const path = `${modules}/private/acme/${name}/${provider}`;
  const exists = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } });
  if (exists.status === 404) {
    await api(base, 'POST', modules, token, { data: { type: 'registry-modules', attributes: { name, provider } } });
  }
  const created = await api(base, 'POST', `${path}/versions`, token, {
    data: { type: 'registry-module-versions', attributes: { version } },
  });
  const upload = new URL(created.data.links.upload, base);
  const put = await fetch(upload, { method: 'PUT', body: targz(files), headers: { 'content-type': 'application/octet-stream' } });
  if (!put.ok) throw new Error(`upload of ${name} ${version}: ${put.status}`);
  for (let i = 0; i < 300; i += 1) {
    const shown = await api(base, 'GET', `${path}/version?module_version=${version}`, token);
    if (shown.data.attributes.status !== 'pending') return shown.data.attributes.status;
    await new Promise((done) => setTimeout(done, 100));
  }
  throw new Error(`${name} ${version} is still pending`);
}

const VPC_MAIN = `
terraform {
  required_providers {
    aws = { source = "hashicorp/aws", version = ">= 5.0" }
  }
}
variable "cidr" {
  type        = string
  description = "The VPC's address range."
  default     = "10.0.0.0/16"
}
variable "name" {
  type        = string
  description = "What to call the VPC."
}
resource "aws_vpc" "this" {
  cidr_block = var.cidr
}
output "vpc_id" {
  description = "The VPC's id."
  value       = aws_vpc.this.id
}
`;

const VPC_README = `# vpc

A VPC with sensible defaults, for every team's network.

| input | why |
|---|---|
| \`cidr\` | the address range |

\`\`\`hcl
module "vpc" {
  source = "…"
  name   = "main"
}
\`\`\`
`;

const HOSTILE_README = `# hostile

Nothing here may run.

<script>window.pwned = 'script'; alert('script')</script>

An image: <img src="x" onerror="window.pwned = 'onerror'; alert('onerror')"> and a
[link](javascript:alert('link')).
`;

async function seed(base, admin) {
  await api(base, 'POST', '/api/v2/organizations', admin, {
    data: { type: 'organizations', attributes: { name: 'acme', email: 'ops@example.com' } },
  });
  const teams = await api(base, 'GET', '/api/v2/organizations/acme/teams', admin);
  const owners = teams.data.find((team) => team.attributes.name === 'owners');
  const token = (await api(base, 'POST', `/api/v2/teams/${owners.id}/authentication-token`, admin)).data.attributes.token;

  const vpc = { 'main.tf': VPC_MAIN, 'README.md': VPC_README, 'modules/subnets/main.tf': 'variable "azs" {\n  type = list(string)\n}\n' };
  for (const version of ['1.0.0', '1.1.0', '1.2.0']) await publish(base, token, 'vpc', 'aws', version, vpc);
  await publish(base, token, 'dns', 'google', '0.3.0', { 'main.tf': 'variable "zone" {}\n', 'README.md': '# dns\n\nZones.\n' });
  await publish(base, token, 'hostile', 'aws', '1.0.0', { 'main.tf': 'variable "x" {}\n', 'README.md': HOSTILE_README });
  await lifecycle(base, token, '1.0.0', {
    deprecation: { 'deprecated-status': 'Deprecated', reason: 'Use 1.1: it keeps the flow logs.', link: 'https://example.com/vpc-1.1' },
  });
  await lifecycle(base, token, '1.2.0', {
    deprecation: { 'deprecated-status': 'Deprecated', reason: 'Broken routes.' },
    revocation: { status: 'Revoked', message: 'It drops the default route.' },
  });

  const pool = await api(base, 'POST', '/api/v2/organizations/acme/agent-pools', token, {
    data: { type: 'agent-pools', attributes: { name: 'builders' } },
  });
  const agentToken = await api(base, 'POST', `/api/v2/agent-pools/${pool.data.id}/authentication-tokens`, token, {
    data: { type: 'authentication-tokens', attributes: { description: 'ci runners' } },
  });
  await api(base, 'POST', '/api/agent/register', agentToken.data.attributes.token, { name: 'runner-1' });

  await api(base, 'POST', '/v1/aws/roles/deploy', null,
    { credential_type: 'assumed_role', role_arns: ['arn:aws:iam::123456789012:role/deploy'], default_sts_ttl: 900, max_sts_ttl: 3600 },
    { 'x-vault-token': BROKER_TOKEN, 'content-type': 'application/json' });
  return { token };
}

/// Deprecates or revokes a version of acme's vpc/aws through the API (HCP Terraform's "Manage
/// module versions" PATCH).
async function lifecycle(base, token, version, attributes) {
  const path = `/api/v2/organizations/acme/registry-modules/private/acme/vpc/aws/${version}`;
  await api(base, 'PATCH', path, token, { data: { type: 'module-versions', attributes } });
}

// ----- the browser -----

async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

async function run() {
  const { url, admin } = await startServer();
  const { token } = await seed(url, admin);
  mkdirSync(SHOTS, { recursive: true });

  // --no-sandbox: CI runs as root, where Chromium's sandbox cannot start.
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  const context = await browser.newContext({ viewport: { width: 1200, height: 800 } });
  // The usage snippet's copy button writes the clipboard; the check reads it back.
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: url });
  const page = await context.newPage();
  const dialogs = [];
  const consoleMessages = [];
  page.on('dialog', (dialog) => { dialogs.push(dialog.message()); dialog.dismiss().catch(() => {}); });
  page.on('console', (message) => consoleMessages.push(message.text()));

  await page.goto(`${url}/`);
  check(new URL(page.url()).pathname === '/app/sign-in', 'opening dev-server leads to the sign-in page');
  await shot(page, 'sign-in');

  await page.fill('#token', 'not-a-token');
  await page.click('form[action="/app/sign-in"] button');
  check((await page.textContent('[role=alert]')).includes('not valid'), 'a wrong token is refused on the page');

  await page.fill('#token', token);
  await page.click('form[action="/app/sign-in"] button');
  await page.waitForURL(`${url}/app`);
  check((await page.textContent('h1')) === 'Organizations', 'signing in opens the organizations');
  const session = (await context.cookies()).find((cookie) => cookie.name === 'hangar_session');
  check(session && session.httpOnly && session.sameSite === 'Strict' && session.value !== token,
    'the session cookie is HttpOnly, SameSite=Strict, and not the token');
  await shot(page, 'organizations');

  await page.click('a[href="/app/organizations/acme/modules"]');
  await page.fill('#q', 'vp');
  await page.click('form.filters button');
  await page.waitForURL(/q=vp/);
  const listed = await page.textContent('table.list tbody');
  check(listed.includes('acme/vpc') && !listed.includes('acme/dns'), 'searching finds the vpc module alone');
  await page.goto(`${url}/app/organizations/acme/modules`);
  await page.fill('#provider', 'google');
  await page.click('form.filters button');
  const filtered = await page.textContent('table.list tbody');
  check(filtered.includes('acme/dns') && !filtered.includes('acme/vpc'), 'the provider filter keeps google modules');
  await page.goto(`${url}/app/organizations/acme/modules`);
  await shot(page, 'modules');

  await page.click('a[href="/app/organizations/acme/modules/private/acme/vpc/aws"]');
  check((await page.textContent('h1')) === 'acme/vpc/aws', 'the module page opens');
  const readme = await page.textContent('article.markdown');
  check(readme.includes('A VPC with sensible defaults'), 'the README is rendered');
  check(await page.locator('article.markdown table').count() === 1, 'the README table is a table');
  const inputs = await page.textContent('section.inputs');
  check(inputs.includes('cidr') && inputs.includes("The VPC's address range.") && inputs.includes('name'), 'the inputs are listed');
  check((await page.textContent('section.usage pre')).includes('version = "~> 1.1"'), 'the usage snippet names the latest minor version');
  await page.click('section.usage button.copy');
  await page.waitForFunction(() => document.querySelector('section.usage button.copy').textContent !== 'Copy');
  check((await page.textContent('section.usage button.copy')) === 'Copied', 'the copy button copies the snippet (its script runs under the CSP)');
  check((await page.evaluate(() => navigator.clipboard.readText())).includes('version = "~> 1.1"'), 'the clipboard holds the snippet');
  const versions = await page.textContent('section.versions');
  check(['1.0.0', '1.1.0', '1.2.0'].every((v) => versions.includes(v)), 'every version is listed');
  const row = (version) => page.locator('section.versions tr', { has: page.locator(`a:text-is("${version}")`) });
  check(await row('1.0.0').locator('.status-deprecated').count() === 1, 'the deprecated version is marked');
  check((await row('1.0.0').textContent()).includes('Use 1.1: it keeps the flow logs.'), "the deprecation's reason is shown");
  check(await row('1.2.0').locator('.status-revoked').count() === 1, 'the revoked version is marked');
  check((await row('1.2.0').textContent()).includes('It drops the default route.'), "the revocation's message is shown");
  check(await row('1.1.0').locator('.status-deprecated, .status-revoked').count() === 0, 'the latest version is neither');
  await shot(page, 'module');

  await page.goto(`${url}/app/organizations/acme/modules/private/acme/hostile/aws`);
  const hostile = await page.textContent('article.markdown');
  check(hostile.includes("<script>window.pwned = 'script'"), 'a README <script> shows as text');
  check(hostile.includes('onerror="window.pwned'), 'a README <img onerror> shows as text');
  check(await page.locator('article.markdown script, article.markdown img, article.markdown [onerror]').count() === 0,
    'no element comes from the README HTML');
  check(await page.locator('a[href^="javascript:"]').count() === 0, 'no javascript: link');
  check((await page.evaluate(() => window.pwned)) === undefined, 'nothing in the README ran');
  check(dialogs.length === 0, `no dialog opened (${dialogs.join(', ')})`);

  await page.goto(`${url}/app/organizations/acme/agent-pools`);
  const pools = await page.textContent('main');
  check(pools.includes('builders') && pools.includes('runner-1'), 'the pool and its agent are shown');
  check((await page.textContent('section.pool tbody .badge')) === 'idle', "the agent's status is shown");
  check(pools.includes('Capacity used: 1 of'), 'the capacity used is shown');
  await shot(page, 'agent-pools');

  // No page strands a signed-in person: an organization's name leads to its page, a missing
  // page keeps the header and the sign-out form, and the sign-out page answers a GET.
  await page.goto(`${url}/app`);
  await page.click('a[href="/app/organizations/acme"]');
  check((await page.textContent('h1')) === 'acme', "an organization's name opens its page");
  check(await page.locator('a[href="/app/organizations/acme/modules"]').count() === 1, "the organization's page links its modules");
  await page.goto(`${url}/app/organizations/nowhere-at-all`);
  check((await page.textContent('h1')) === 'Not found', 'a missing page is the 404 page');
  check(await page.locator('nav.top form.sign-out button').count() === 1, 'the 404 page keeps the sign-out form');
  await page.goto(`${url}/app/sign-out`);
  check((await page.textContent('main')).includes('Signed in as'), 'the sign-out page says who is signed in');

  await page.click('form.sign-out button');
  await page.waitForURL(`${url}/app/sign-in`);
  await page.goto(`${url}/app/organizations/acme/modules`);
  check(new URL(page.url()).pathname === '/app/sign-in', 'after signing out the pages ask to sign in again');
  check(!(await context.cookies()).some((cookie) => cookie.name === 'hangar_session'), 'signing out clears the session cookie');

  await page.fill('#token', BROKER_TOKEN);
  await page.click('form[action="/app/sign-in"] button');
  await page.waitForURL(`${url}/app/broker`);
  check((await page.textContent('main')).includes('aws/'), "a broker token opens the broker's mounts");
  await shot(page, 'broker');
  await page.click('a[href="/app/broker/mount?path=aws"]');
  const mount = await page.textContent('main');
  check(mount.includes('deploy') && mount.includes('assumed_role') && mount.includes('15m'), 'a mount shows its roles and TTLs');
  await shot(page, 'broker-mount');

  check(!consoleMessages.some((text) => /pwned|alert/.test(text)), 'the console logged nothing from the README');
}

run().then(() => finish(), (error) => finish(error));
