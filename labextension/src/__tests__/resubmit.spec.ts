import { resubmitBody, resubmitTargets } from '../form';
import { IJobDetail, SUBMIT_FIELDS } from '../tokens';

const detail: IJobDetail = {
  id: 'j1',
  state: 'FAILED',
  notebook: 'train.ipynb',
  gpus: 2,
  priority: 'high',
  tenant: 'vision',
  owner: 'me',
  created: '2026-01-01T00:00:00.000+00:00',
  started: null,
  finished: null,
  reason: '',
  preemptible: true,
  max_runtime: 600,
  runtime_estimate: { seconds: null, source: null, basis: null, samples: null },
  allocation: [],
  borrowed: false,
  attempts: 1,
  preemptions: 0,
  progress: null,
  message: '',
  stalled_since: null,
  waiting_on_data: null,
  after: [],
  when: 'succeeded',
  pipeline_id: null,
  schedule_id: null,
  parameters: { lr: 0.1 },
  max_retries: 0,
  gpu_type: 'A100',
  position: null,
  estimated_start: null,
  stall_timeout: 900,
  checkpoint_interval: 120,
  cpus: 2,
  memory: 4096,
  activity: null,
  gpu_hours: { allocated: 0, idle: 0, waiting_on_data: 0 },
  notify: [{ webhook: 'https://hooks.example.org/gpu', events: ['failed'] }],
  notified: []
};

describe('resubmit', () => {
  it('asks again for every submit field, as the job asked for it', () => {
    const body = resubmitBody(detail);
    expect(Object.keys(body).sort()).toEqual([...SUBMIT_FIELDS].sort());
    for (const key of SUBMIT_FIELDS) {
      expect(body[key]).toEqual(detail[key]);
    }
  });

  it('leaves out targets with an apprise URL (shown without its token)', () => {
    const body = resubmitBody({
      ...detail,
      notify: [{ apprise: 'slack://…', events: ['failed'] }]
    });
    expect(body.notify).toBeUndefined();
  });

  it('keeps the webhook and mail targets beside an apprise URL', () => {
    const targets = [
      { webhook: 'https://example.org/hook', events: ['succeeded'] },
      { apprise: 'slack://' },
      { email: 'me@example.org' }
    ];
    expect(resubmitTargets(targets)).toEqual([targets[0], targets[2]]);
    expect(resubmitTargets(undefined)).toBeUndefined();
  });
});
