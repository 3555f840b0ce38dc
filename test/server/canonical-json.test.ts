/**
 * The canonical text the middleware fingerprints a JSON body by (src/http/canonical-json.ts):
 * exact numbers, RFC 8785 keys and strings, and the same text as RFC 8785 (the `canonicalize`
 * package the fingerprint used before) wherever JSON.parse loses nothing, so keys stored before
 * the change still match.
 */
import canonicalize from "canonicalize";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJsonText, canonicalNumber, canonicalValueText, MAX_JSON_DEPTH } from "../../src/http/canonical-json.js";

const text = (json: string) => {
  const result = canonicalJsonText(json);
  if (result.kind !== "ok") throw new Error(`${json.slice(0, 60)}: ${result.kind}`);
  return result.text;
};

describe("canonicalNumber", () => {
  it("gives one text to every spelling of a number", () => {
    for (const spellings of [
      ["1", "1.0", "1e0", "10E-1", "0.1e1", "100e-2", "1.000e+0", "1E00"],
      ["0", "-0", "0.0", "0e10", "-0.000e-99", "0E+0"],
      ["-12.5", "-125e-1", "-1.25E1", "-0.125e2"],
      ["12345678901234567890", "1234567890123456789e1", "1.234567890123456789e19"],
      ["1e+21", "1e21", "10e20", "1000000000000000000000"],
      ["1e-7", "0.0000001", "10e-8"],
      ["0.000001", "1e-6"],
    ]) {
      const texts = new Set(spellings.map(canonicalNumber));
      expect([...texts], spellings.join(" ")).toHaveLength(1);
    }
  });

  it("tells apart numbers a double cannot", () => {
    const distinct = [
      "12345678901234567890", "12345678901234567891", "9007199254740992", "9007199254740993",
      "0.1", "0.10000000000000000001", "1e400", "1e401", "1e-400", "2e-400", "-1e400",
      `1e${"9".repeat(30)}`, `1e${"9".repeat(29)}8`, `1e-${"9".repeat(30)}`, `1e-${"9".repeat(29)}8`,
    ];
    expect(new Set(distinct.map(canonicalNumber)).size).toBe(distinct.length);
  });

  it("lays numbers out as ECMAScript's Number-to-String does, every digit kept", () => {
    expect(canonicalNumber("12345678901234567890")).toBe("12345678901234567890");
    expect(canonicalNumber("123456789012345678901234")).toBe("1.23456789012345678901234e+23");
    expect(canonicalNumber("0.10000000000000000001")).toBe("0.10000000000000000001");
    expect(canonicalNumber("1e400")).toBe("1e+400");
    expect(canonicalNumber("-25e-400")).toBe("-2.5e-399");
    expect(canonicalNumber("1.5e-7")).toBe("1.5e-7");
    // An exponent too long for a double's arithmetic: decimal arithmetic on the digits.
    expect(canonicalNumber(`10e${"9".repeat(20)}`)).toBe(`1e+1${"0".repeat(20)}`);
    expect(canonicalNumber(`0.01e-${"0".repeat(5)}1${"0".repeat(19)}`)).toBe(`1e-1${"0".repeat(18)}2`);
    expect(canonicalNumber(`123.4e${"0".repeat(3)}1${"0".repeat(17)}`)).toBe(`1.234e+1${"0".repeat(16)}2`);
  });

  it("writes what JSON.stringify writes for every double", () => {
    fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), (d) => {
      expect(canonicalNumber(JSON.stringify(d))).toBe(JSON.stringify(d));
    }), { numRuns: 2000 });
  });

  it("gives the same text to a double written with extra zeros, another exponent or a moved point", () => {
    fc.assert(fc.property(fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer({ min: 0, max: 5 }), (d, zeros) => {
      const plain = JSON.stringify(Math.abs(d));
      const [mantissa = "", exponent = "0"] = plain.split("e");
      const padded = mantissa.includes(".") ? mantissa + "0".repeat(zeros) : zeros > 0 ? `${mantissa}.${"0".repeat(zeros)}` : mantissa;
      const moved = `${padded}e${exponent}`;
      const shifted = `${mantissa.replace(".", "").replace(/^0+(?=\d)/, "")}e${Number(exponent) - (mantissa.split(".")[1]?.length ?? 0)}`;
      expect(canonicalNumber(moved)).toBe(canonicalNumber(plain));
      expect(canonicalNumber(shifted)).toBe(canonicalNumber(plain));
    }), { numRuns: 1000 });
  });
});

describe("canonicalJsonText", () => {
  it("is RFC 8785's text wherever JSON.parse loses nothing (fingerprints from before still match)", () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      const json = JSON.stringify(value);
      expect(text(json)).toBe(canonicalize(JSON.parse(json)));
    }), { numRuns: 1000 });
  });

  it("sorts keys by UTF-16 code units and writes strings as JSON.stringify does", () => {
    expect(text('{"b":1,"a":2,"\\u00e9":3,"\\ud83d\\ude00":4,"\\uffff":5,"A":6}')).toBe('{"A":6,"a":2,"b":1,"é":3,"😀":4,"\uffff":5}');
    expect(text('"a\\u0000b\\u001f\\ud800\\n\\/"')).toBe('"a\\u0000b\\u001f\\ud800\\n/"');
  });

  it("keeps __proto__ as an ordinary key, and the last of duplicate keys", () => {
    expect(text('{"__proto__":{"admin":true}}')).toBe('{"__proto__":{"admin":true}}');
    expect(text('{"a":1,"a":2,"__proto__":1,"__proto__":[3]}')).toBe('{"__proto__":[3],"a":2}');
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it("refuses invalid JSON, and nesting deeper than the limit before parsing it", () => {
    for (const bad of ["", "{", '{"a":1,}', "[1,]", "01", "1.", ".5", "+1", "NaN", "Infinity", '"\u0000"', "\uFEFF1", "'a'", "[1] [2]"]) {
      expect(canonicalJsonText(bad).kind, JSON.stringify(bad)).toBe("invalid");
    }
    const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
    expect(canonicalJsonText(deep(MAX_JSON_DEPTH)).kind).toBe("ok");
    expect(canonicalJsonText(deep(MAX_JSON_DEPTH + 1)).kind).toBe("too_deep");
    expect(canonicalJsonText(deep(1_000_000)).kind).toBe("too_deep");
    expect(canonicalJsonText(JSON.stringify("[{".repeat(100_000))).kind).toBe("ok");
  });

  it("canonicalises what a body parser left the same way, and refuses what JSON cannot carry", () => {
    expect(canonicalValueText({ b: [1.5, "x", null, true], a: new Date(0), u: undefined })).toBe(text('{"a":"1970-01-01T00:00:00.000Z","b":[1.50,"x",null,true]}'));
    expect(canonicalValueText(12345678901234567890n)).toBe("12345678901234567890");
    expect(() => canonicalValueText({ n: Number.NaN })).toThrow();
    expect(() => canonicalValueText({ n: Infinity })).toThrow();
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(() => canonicalValueText(cycle)).toThrow(/deeper/);
  });
});
