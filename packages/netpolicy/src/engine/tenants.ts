// Tenants: the unit node-wide capacity is shared by. A namespace is cheap to make where tenants get
// namespaces by self-service (Capsule, HNC, Rancher projects), so per-namespace budgets let one owner
// take a node's whole Service maps or policy map through many namespaces. Those systems all label the
// namespaces they make with their tenant (capsule.clastix.io/tenant, field.cattle.io/projectId...),
// and a Namespace's labels are written by whoever may update Namespace objects: the admin or the
// provisioning system, never a pod owner or a namespaced policy author (trusted, docs/architecture.md).
// So the admin names that label (--tenant-label, chart netpolicy.tenantLabel): namespaces that share
// its value are one tenant; a namespace without it is a tenant of its own. Budgets (Service frontends
// and backends, policy-map entries) and the identity cap are per tenant.
export const DEFAULT_TENANT_LABEL = 'cascade.dev/tenant';

/** Whether `v` can name the tenant label: a label key (an optional DNS prefix and `/`, then a name), or '' for none. */
export function validTenantLabel(v: string): boolean {
  if (v === '') return true;
  const m =
    /^(?:([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)\/)?([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$/.exec(v);
  return m !== null;
}

/** A tenant's id: the namespace's name, or `<label>=<value>` (never a namespace name: it holds '='). */
export type TenantId = string;

/** The tenant a namespace belongs to, from its labels. */
export function tenantOf(
  namespace: string,
  labels: Readonly<Record<string, string>> | undefined,
  label: string = DEFAULT_TENANT_LABEL,
): TenantId {
  const v = label ? labels?.[label] : undefined;
  return v ? `${label}=${v}` : namespace;
}

/** How a tenant is named in a message: `namespace shop` or `tenant cascade.dev/tenant=acme`. */
export function describeTenant(t: TenantId): string {
  return t.includes('=') ? `tenant ${t}` : `namespace ${t}`;
}
