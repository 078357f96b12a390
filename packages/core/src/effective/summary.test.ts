import { describe, expect, it } from 'vitest';
import {
  effectivePolicyCrd,
  effectiveSummary,
  SUMMARY_SOURCES_MAX,
  SUMMARY_TARGET_MAX,
} from './effective-policy.ts';

const ref = (kind: string, namespace: string, name: string) => ({ kind, namespace, name });

describe('kubectl get effectivepolicies columns', () => {
  it('read the summary strings (kubectl prints only the first value of a list)', () => {
    const spec = effectivePolicyCrd.spec as {
      versions: { additionalPrinterColumns: { name: string; jsonPath: string }[] }[];
    };
    const cols = Object.fromEntries(
      spec.versions[0]!.additionalPrinterColumns.map((c) => [c.name, c.jsonPath]),
    );
    expect(cols.Target).toBe('.spec.summary.target');
    expect(cols.Sources).toBe('.spec.summary.sources');
  });

  it('a long label set is cut and says how many labels it has; every source is counted', () => {
    const labels = Array.from({ length: 12 }, (_, i) => `app.kubernetes.io/label-${i}=value-${i}`).join(',');
    const sources = Array.from({ length: 9 }, (_, i) => ref('NetworkPolicy', 'team-a', `policy-${i}`));
    const s = effectiveSummary(
      labels,
      [ref('AdminNetworkPolicy', '', 'cluster-guard'), ...sources],
      'NetworkPolicy',
      12,
    );
    expect(s.target.length).toBeLessThanOrEqual(SUMMARY_TARGET_MAX);
    expect(s.target).toMatch(/^app\.kubernetes\.io\/label-0=value-0.*\.\.\. \(12 labels\)$/);
    expect(s.sources.length).toBeLessThanOrEqual(SUMMARY_SOURCES_MAX);
    expect(s.sources).toBe('AdminNetworkPolicy cluster-guard, team-a/policy-0 +8');
    const shown = s.sources.split(', ').length;
    expect(Number(s.sources.match(/\+(\d+)$/)![1]) + shown).toBe(10);
  });

  it('short values are kept whole; no source reads <none>', () => {
    expect(effectiveSummary('HTTPRoute orders', [ref('GuardPolicy', 'infra', 'a')], 'GuardPolicy')).toEqual({
      target: 'HTTPRoute orders',
      sources: 'infra/a',
    });
    expect(effectiveSummary('app=web', [], 'NetworkPolicy').sources).toBe('<none>');
  });
});
