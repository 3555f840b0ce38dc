/**
 * The key a memory store files a record under, from the parts that name it (tenant and key,
 * tenant and saga id…). JSON of the array, not the parts joined by a separator: any separator
 * may occur inside a tenant or a key (tenant "a\u0000b" + key "c" joined by NUL is tenant "a" +
 * key "b\u0000c"), while two different lists of strings never have the same JSON.
 */
export const recordId = (...parts: readonly string[]): string => JSON.stringify(parts);
