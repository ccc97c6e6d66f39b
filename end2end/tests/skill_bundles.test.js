// Agent Skills bundles end to end: a reviewer exports the current version of a skill as a
// zip from its page, edits the SKILL.md (frontmatter beyond name and description, a new
// instruction), uploads the folder as a zip file, another reviewer approves the candidate,
// and the new version's export holds the uploaded SKILL.md byte for byte and the same
// reference file. A bundle with a bad file name is refused on the page, naming the file.
// Each with JavaScript on and off (the upload is a plain multipart form post either way).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import zlib from 'node:zlib';
import {
  launch, newPage, signIn, screenshot, waitHydrated, ADMIN_PASSWORD, REVIEWER_PASSWORD,
} from './browser.js';
import { McpClient, createKey } from './mcp.js';

const SKILL = 'refund-handling';

// --- A small zip writer and reader over node:zlib (Node 20 has no zlib.crc32). ---

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(buffer) {
  let crc = 0xffffffff;
  for (const byte of buffer) crc = CRC_TABLE[(crc ^ byte) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** `files`: [name, Buffer] pairs, deflated, UTF-8 names, no timestamps. */
function zip(files) {
  const parts = [];
  const central = [];
  let offset = 0;
  for (const [name, data] of files) {
    const nameBytes = Buffer.from(name, 'utf8');
    const packed = zlib.deflateRawSync(data);
    const crc = crc32(data);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6);
    local.writeUInt16LE(8, 8);
    local.writeUInt16LE(0x21, 12);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(data.length, 22);
    local.writeUInt16LE(nameBytes.length, 26);
    const entry = Buffer.alloc(46);
    entry.writeUInt32LE(0x02014b50, 0);
    entry.writeUInt16LE(20, 4);
    entry.writeUInt16LE(20, 6);
    entry.writeUInt16LE(0x0800, 8);
    entry.writeUInt16LE(8, 10);
    entry.writeUInt16LE(0x21, 14);
    entry.writeUInt32LE(crc, 16);
    entry.writeUInt32LE(packed.length, 20);
    entry.writeUInt32LE(data.length, 24);
    entry.writeUInt16LE(nameBytes.length, 28);
    entry.writeUInt32LE(offset, 42);
    parts.push(local, nameBytes, packed);
    central.push(entry, nameBytes);
    offset += local.length + nameBytes.length + packed.length;
  }
  const directory = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(files.length, 8);
  end.writeUInt16LE(files.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...parts, directory, end]);
}

/** The files of a zip, name → Buffer, in directory order. */
function unzip(buffer) {
  let end = buffer.length - 22;
  while (end >= 0 && buffer.readUInt32LE(end) !== 0x06054b50) end -= 1;
  assert.ok(end >= 0, 'the export is a zip');
  const count = buffer.readUInt16LE(end + 10);
  let at = buffer.readUInt32LE(end + 16);
  const files = new Map();
  for (let i = 0; i < count; i += 1) {
    assert.equal(buffer.readUInt32LE(at), 0x02014b50);
    const method = buffer.readUInt16LE(at + 10);
    const size = buffer.readUInt32LE(at + 20);
    const nameLength = buffer.readUInt16LE(at + 28);
    const extra = buffer.readUInt16LE(at + 30);
    const comment = buffer.readUInt16LE(at + 32);
    const local = buffer.readUInt32LE(at + 42);
    const name = buffer.subarray(at + 46, at + 46 + nameLength).toString('utf8');
    const data = local + 30 + buffer.readUInt16LE(local + 26) + buffer.readUInt16LE(local + 28);
    const packed = buffer.subarray(data, data + size);
    files.set(name, method === 8 ? zlib.inflateRawSync(packed) : Buffer.from(packed));
    at += 46 + nameLength + extra + comment;
  }
  return files;
}

// --- The console side. ---

/** Clicks an export link and reads the downloaded zip. */
async function download(page, link) {
  const [file] = await Promise.all([page.waitForEvent('download'), link.click()]);
  return unzip(await readFile(await file.path()));
}

/** The exported SKILL.md with `marker`'s frontmatter and instruction added; earlier runs'
 * additions (license, metadata) are replaced, not repeated. */
function edited(exported, marker) {
  const close = exported.indexOf('\n---\n', 3);
  const front = exported.slice(4, close + 1).split('\n');
  const kept = [];
  let inMetadata = false;
  for (const line of front) {
    if (line.startsWith('metadata:')) { inMetadata = true; continue; }
    if (inMetadata && line.startsWith(' ')) continue;
    inMetadata = false;
    if (!line.startsWith('license:') && line !== '') kept.push(line);
  }
  const body = exported.slice(close + 5).trim();
  return `---\n${kept.join('\n')}\nlicense: Apache-2.0\nmetadata:\n  run: "${marker}"\n---\n\n${body}\n\n${marker}: read the order id back before refunding.\n\n`;
}

let supportKey;
before(() => { supportKey = createKey('support-bundles-e2e', 'support'); });

/** Agent feedback on the skill, for the upload's provenance.json to cite. */
async function feedbackId(marker) {
  const support = await new McpClient(supportKey).connect();
  const { sessionId } = await support.learnRole('tier-1-support');
  const feedback = await support.tool('feedback_skill', {
    skill: SKILL, rating: 2, session_id: sessionId, comment: `Read the order id back (${marker}).`,
  });
  assert.equal(feedback.isError, false, feedback.text);
  return feedback.structured.feedback_id;
}

async function uploadBundle(page, js, bundle) {
  await page.goto(`/skills/${SKILL}`);
  if (js) await waitHydrated(page);
  await page.setInputFiles('#up-bundle', { name: `${SKILL}.zip`, mimeType: 'application/zip', buffer: bundle });
  // A plain form post with JavaScript on or off: the server redirects back to the page.
  await Promise.all([page.waitForNavigation(), page.click('button:has-text("Upload and propose")')]);
  assert.match(new URL(page.url()).pathname, new RegExp(`^/skills/${SKILL}$`));
}

for (const js of [true, false]) {
  const mode = js ? 'js' : 'nojs';
  describe(`skill bundles with JavaScript ${js ? 'on' : 'off'}`, () => {
    let browser;
    before(async () => { browser = await launch(); });
    after(async () => { await browser?.close(); });

    it('an exported zip, edited and uploaded, comes back from the approved version byte-identical', async () => {
      const marker = `BUNDLE-${mode.toUpperCase()}-${Date.now()}`;
      const cited = await feedbackId(marker);

      const reviewer = await newPage(browser, js);
      await signIn(reviewer, 'reviewer', REVIEWER_PASSWORD);
      await reviewer.goto(`/skills/${SKILL}`);
      if (js) await waitHydrated(reviewer);
      const current = reviewer.locator('ul.versions li', { has: reviewer.locator('.badge', { hasText: 'current' }) })
        .locator('a[href$=".zip"]');
      assert.equal(await current.count(), 1);
      const exported = await download(reviewer, current);
      assert.deepEqual([...exported.keys()], [
        `${SKILL}/SKILL.md`, `${SKILL}/references/refund-policy.md`, `${SKILL}/provenance.json`,
      ]);

      const skillMd = edited(exported.get(`${SKILL}/SKILL.md`).toString('utf8'), marker);
      const policy = exported.get(`${SKILL}/references/refund-policy.md`);
      const provenance = JSON.stringify({ note: `Read the order id back (${marker}).`, sources: [cited] });
      await uploadBundle(reviewer, js, zip([
        [`${SKILL}/SKILL.md`, Buffer.from(skillMd, 'utf8')],
        [`${SKILL}/references/refund-policy.md`, policy],
        [`${SKILL}/provenance.json`, Buffer.from(provenance, 'utf8')],
      ]));
      const notice = await reviewer.textContent('p.notice.success');
      const recorded = notice.match(/Candidate (cand_[0-9a-f]+) recorded from refund-handling\.zip/);
      assert.ok(recorded, notice);
      const candidateId = recorded[1];
      await screenshot(reviewer, `bundle-uploaded-${mode}`);
      if (js) assert.deepEqual(reviewer.hydrationErrors, []);
      await reviewer.context().close();

      // Another reviewer (the admin) sees what the bundle changes and approves it.
      const admin = await newPage(browser, js);
      await signIn(admin, 'admin', ADMIN_PASSWORD);
      await admin.goto(`/candidates/${candidateId}`);
      if (js) await waitHydrated(admin);
      const main = await admin.textContent('main');
      assert.match(main, /Resources \(they replace the current ones\): refund-policy: Refund policy/);
      assert.match(main, /"license": "Apache-2.0"/);
      assert.match(await admin.textContent('pre.diff'), new RegExp(`\\+ ${marker}`));
      await admin.fill('#decide-reason', `Bundle round trip (${mode}).`);
      await admin.check('input[name=decision][value=approve]');
      if (js) {
        await admin.click('button:has-text("Record decision")');
        await admin.waitForSelector('text=is now current');
      } else {
        await Promise.all([admin.waitForNavigation(), admin.click('button:has-text("Record decision")')]);
      }
      await admin.goto(`/candidates/${candidateId}`);
      const approved = (await admin.textContent('main')).match(/Approved as version (\d+)\./);
      assert.ok(approved, 'the candidate page names the new version');
      const version = approved[1];

      await admin.goto(`/skills/${SKILL}`);
      if (js) await waitHydrated(admin);
      const link = admin.locator(`a[href="/console/export/skills/${SKILL}/versions/${version}.zip"]`);
      assert.equal(await link.count(), 1);
      const back = await download(admin, link);
      assert.equal(Buffer.compare(back.get(`${SKILL}/SKILL.md`), Buffer.from(skillMd, 'utf8')), 0,
        `the exported SKILL.md is the uploaded one:\n${back.get(`${SKILL}/SKILL.md`)}\n---\n${skillMd}`);
      assert.equal(Buffer.compare(back.get(`${SKILL}/references/refund-policy.md`), policy), 0);
      const exportedProvenance = JSON.parse(back.get(`${SKILL}/provenance.json`).toString('utf8'));
      assert.equal(exportedProvenance.candidate.id, candidateId);
      assert.equal(exportedProvenance.candidate.reviewer, 'admin');
      if (js) assert.deepEqual(admin.hydrationErrors, []);
      await admin.context().close();
    });

    it('a bundle whose reference has a bad name is refused on the page, naming the file', async () => {
      const page = await newPage(browser, js);
      await signIn(page, 'reviewer', REVIEWER_PASSWORD);
      const skillMd = `---\nname: ${SKILL}\ndescription: Refunds within policy.\n---\n\n# Refunds\n\nCheck first.\n`;
      await uploadBundle(page, js, zip([
        ['SKILL.md', Buffer.from(skillMd, 'utf8')],
        ['references/Policy Doc.md', Buffer.from('# Policy\n\n30 days.\n', 'utf8')],
      ]));
      const refusal = await page.textContent('p.notice.error');
      assert.match(refusal, /^references\/Policy Doc\.md: resource name must be 1–64 lowercase letters, digits and single hyphens/);
      assert.match(refusal, /Nothing was recorded\.$/);
      await screenshot(page, `bundle-refused-${mode}`);
      await page.context().close();
    });
  });
}
