/**
 * What the explorer's fault layers below the store share: which store methods change nothing, and
 * a Proxy over a store that builds each method's stand-in once (a store written as a class keeps
 * its methods on its prototype, so wrapping by keys would miss them).
 */

/** Operations that change nothing, by name. */
const READS = /^(get|list|count|now|load|active|quotaUsage|steps|history|find|has)/;

export const isReadMethod = (name: string): boolean => READS.test(name);

export type StoreMethod = (...args: unknown[]) => Promise<unknown>;

/** `store` with each method replaced by `make(name, method bound to the store)`, built on first use. */
export function withMethods<T extends object>(store: T, make: (name: string, method: StoreMethod) => StoreMethod): T {
  const methods = new Map<string, StoreMethod>();
  return new Proxy(store, {
    get(target, name, receiver) {
      const member: unknown = Reflect.get(target, name, receiver);
      if (typeof name !== "string" || typeof member !== "function") return member;
      let method = methods.get(name);
      if (!method) methods.set(name, (method = make(name, (member as StoreMethod).bind(target))));
      return method;
    },
  });
}
