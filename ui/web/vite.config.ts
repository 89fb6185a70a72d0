import { defineConfig } from 'vitest/config';
import react from '@vitejs/plugin-react';

// The build goes to ../dist, which the Go binary embeds (ui/ui.go). Keep it
// deterministic: CI rebuilds it and fails when it differs from the commit.
export default defineConfig({
  plugins: [react()],
  base: '/',
  build: {
    outDir: '../dist',
    emptyOutDir: true,
    sourcemap: false,
    chunkSizeWarningLimit: 1500,
    reportCompressedSize: false,
  },
  server: {
    proxy: {
      '/api': process.env.CRONIX_URL ?? 'http://127.0.0.1:8080',
      '/healthz': process.env.CRONIX_URL ?? 'http://127.0.0.1:8080',
    },
  },
  test: {
    environment: 'jsdom',
    setupFiles: ['./src/test-setup.ts'],
    include: ['src/**/*.test.{ts,tsx}'],
    css: false,
    testTimeout: 60_000,
  },
});
