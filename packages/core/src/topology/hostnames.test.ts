import { describe, expect, it } from 'vitest';
import { hostnamesIntersect, listenerAcceptsRouteHostnames } from './hostnames.ts';

describe('hostname intersection', () => {
  it.each([
    ['api.example.com', 'api.example.com', true],
    ['API.example.com', 'api.EXAMPLE.com', true],
    ['api.example.com', 'web.example.com', false],
    ['*.example.com', 'api.example.com', true],
    ['*.example.com', 'a.b.example.com', true],
    ['*.example.com', 'example.com', false],
    ['api.example.com', '*.example.com', true],
    ['*.example.com', '*.api.example.com', true],
    ['*.api.example.com', '*.example.com', true],
    ['*.example.com', '*.example.org', false],
    ['*.example.com', 'notexample.com', false],
  ])('%s ~ %s = %s', (a, b, want) => {
    expect(hostnamesIntersect(a, b)).toBe(want);
  });

  it('treats a missing listener hostname or empty route hostnames as match-all', () => {
    expect(listenerAcceptsRouteHostnames(undefined, ['x.io'])).toBe(true);
    expect(listenerAcceptsRouteHostnames('x.io', [])).toBe(true);
    expect(listenerAcceptsRouteHostnames('x.io', ['y.io', 'x.io'])).toBe(true);
    expect(listenerAcceptsRouteHostnames('x.io', ['y.io'])).toBe(false);
  });
});
