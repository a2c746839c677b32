import { jobBadges } from '../format';

const NOW = Date.parse('2026-01-01T01:00:00Z');
const WAIT = {
  gpu_util: 12,
  cpu_cores: 1.5,
  io_mib_s: 10,
  hint: 'a local dataset cache may help'
};

describe('job badges', () => {
  it('marks a stalled running job, saying since when', () => {
    const badges = jobBadges(
      {
        state: 'RUNNING',
        stalled_since: '2026-01-01T00:55:00Z',
        waiting_on_data: null
      },
      NOW
    );
    expect(badges.map(b => b.label)).toEqual(['stalled']);
    expect(badges[0].title).toContain('marked 5m 00s ago');
  });

  it('marks a job waiting on data with its figures and the hint', () => {
    const badges = jobBadges(
      { state: 'RUNNING', stalled_since: null, waiting_on_data: WAIT },
      NOW
    );
    expect(badges.map(b => b.kind)).toEqual(['data']);
    expect(badges[0].title).toBe(
      'GPU 12% busy, CPU 1.5 cores, I/O 10 MiB/s: a local dataset cache may help'
    );
  });

  it('shows nothing for a job that runs normally or has ended', () => {
    expect(
      jobBadges(
        { state: 'RUNNING', stalled_since: null, waiting_on_data: null },
        NOW
      )
    ).toEqual([]);
    expect(
      jobBadges(
        {
          state: 'FAILED',
          stalled_since: '2026-01-01T00:55:00Z',
          waiting_on_data: WAIT
        },
        NOW
      )
    ).toEqual([]);
  });
});
