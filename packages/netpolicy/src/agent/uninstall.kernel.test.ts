// Leaving a node on uninstall, on the real kernel: the program attached to veths, cascade-cni in a
// conflist, then leaveNode: no interface carries the program, the pins are gone and the conflist
// holds the main plugin only. The helper runs in a network namespace of its own (a wrapper around
// bpfctl), so the detach-everything of an uninstall touches only this test's veths, never a cluster
// running beside it. The uninstall signal is tested on a real API server in agent.integration.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ARTIFACTS, Datapath } from '@cascade/bpf-datapath';
import { kernelTestsEnabled } from '@cascade/bpf-datapath/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { leaveNode } from './uninstall.ts';

const NS = 'cascade-t-leave';
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
const quiet = (...args: string[]) => {
  try {
    ip(...args);
  } catch {}
};

describe.runIf(kernelTestsEnabled())('an uninstall leaves the node', () => {
  const work = mkdtempSync(join(tmpdir(), 'cascade-leave-'));
  afterAll(() => {
    quiet('netns', 'del', NS);
    rmSync(work, { recursive: true, force: true });
  });

  it('takes cascade-cni out of the chain, detaches the programs from every interface and removes the pins', async () => {
    quiet('netns', 'del', NS);
    ip('netns', 'add', NS);
    for (const n of [1, 2]) ip('-n', NS, 'link', 'add', `lv${n}a`, 'type', 'veth', 'peer', 'name', `lv${n}b`);
    for (const n of [1, 2]) ip('-n', NS, 'link', 'set', `lv${n}a`, 'up');
    const bpfctl = join(work, 'bpfctl');
    writeFileSync(bpfctl, `#!/bin/sh\nexec nsenter --net=/run/netns/${NS} ${ARTIFACTS.bpfctl} "$@"\n`);
    chmodSync(bpfctl, 0o755);
    const pinDir = mkdtempSync('/sys/fs/bpf/cascade-test-');
    const conf = join(work, 'net.d');
    execFileSync('mkdir', ['-p', conf]);
    const main = { type: 'bridge', bridge: 'cni0' };
    writeFileSync(
      join(conf, '10-main.conflist'),
      JSON.stringify({ cniVersion: '1.0.0', name: 'k8s', plugins: [main, { type: 'cascade-cni', pinDir }] }),
    );
    const dp = await Datapath.open({ bpfctl, object: ARTIFACTS.object, pinDir });
    await dp.attach('lv1a');
    await dp.attach('lv2a');
    expect((await dp.attachments()).size).toBe(2);
    expect(ip('-n', NS, '-d', 'link', 'show')).toMatch(/lv1a/);
    const tcShows = () =>
      execFileSync('ip', ['netns', 'exec', NS, 'tc', 'filter', 'show', 'dev', 'lv1a', 'ingress']).toString();
    expect(tcShows()).toContain('from_endpoint');
    const logs: string[] = [];
    const r = await leaveNode(dp, { pinDir, cniConfDir: conf, log: (_l, m) => logs.push(m) });
    expect(r).toEqual({
      unchained: [join(conf, '10-main.conflist')],
      detached: 2,
      pinsRemoved: true,
      failed: [],
    });
    expect(tcShows()).not.toContain('from_endpoint');
    expect(existsSync(pinDir)).toBe(false);
    expect(JSON.parse(readFileSync(join(conf, '10-main.conflist'), 'utf8')).plugins).toEqual([main]);
    expect(logs).toEqual(['Cascade uninstalled: left the node']);
  }, 60_000);
});
