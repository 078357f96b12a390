// Kubernetes label selectors, shared by allowedRoutes here and by the network-policy resolver.
import type { LabelSelector } from './types.ts';

/**
 * Whether `labels` satisfy `selector`. An empty selector ({}) selects everything; a missing one is
 * the caller's decision (Kubernetes uses "nothing" in some places and "everything" in others).
 */
export function matchesSelector(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  const ml = selector.matchLabels;
  if (ml) for (const k in ml) if (labels[k] !== ml[k]) return false;
  const exprs = selector.matchExpressions;
  if (!exprs) return true;
  for (const e of exprs) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    switch (e.operator) {
      case 'In':
        if (!has || !(e.values ?? []).includes(value as string)) return false;
        break;
      case 'NotIn':
        if (has && (e.values ?? []).includes(value as string)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        return false; // an unknown operator selects nothing (fail closed); validation reports it
    }
  }
  return true;
}

/** Problems with a selector, each naming the field; empty when valid. */
export function validateSelector(selector: LabelSelector, field: string): string[] {
  const errors: string[] = [];
  (selector.matchExpressions ?? []).forEach((e, i) => {
    const f = `${field}.matchExpressions[${i}]`;
    if (!['In', 'NotIn', 'Exists', 'DoesNotExist'].includes(e.operator)) {
      errors.push(`${f}.operator: unknown operator "${String(e.operator)}"`);
    } else if ((e.operator === 'In' || e.operator === 'NotIn') && !(e.values && e.values.length > 0)) {
      errors.push(`${f}.values: operator ${e.operator} needs at least one value`);
    } else if (
      (e.operator === 'Exists' || e.operator === 'DoesNotExist') &&
      e.values &&
      e.values.length > 0
    ) {
      errors.push(`${f}.values: operator ${e.operator} takes no values`);
    }
  });
  return errors;
}
