import { GPUSchedError } from '../api';
import { buildSubmit, formField, IFormValues, SubmitFormModel } from '../form';

const values = (patch: Partial<IFormValues> = {}): IFormValues => ({
  notebook: 'train.ipynb',
  gpus: '2',
  gpuType: '',
  priority: 'high',
  tenant: '',
  preemptible: false,
  maxRuntime: '',
  notify: '',
  rows: [{ name: 'lr', value: '0.1' }],
  ...patch
});

describe('buildSubmit', () => {
  it('turns the form into the request body', () => {
    const { spec, errors } = buildSubmit(
      values({ tenant: 'vision', maxRuntime: '1.5', preemptible: true })
    );
    expect(errors).toEqual({});
    expect(spec).toEqual({
      notebook: 'train.ipynb',
      gpus: 2,
      priority: 'high',
      tenant: 'vision',
      preemptible: true,
      parameters: { lr: 0.1 },
      max_runtime: 90
    });
  });

  it('sends "Notify me" as the job\'s notify: targets, none, or left out', () => {
    expect(buildSubmit(values()).spec).not.toHaveProperty('notify');
    expect(buildSubmit(values({ notify: ' , ' })).spec).not.toHaveProperty(
      'notify'
    );
    expect(
      buildSubmit(
        values({ notify: 'me@example.org, https://hooks.example.org/gpu ,' })
      ).spec?.notify
    ).toEqual(['me@example.org', 'https://hooks.example.org/gpu']);
    expect(buildSubmit(values({ notify: 'None' })).spec?.notify).toEqual([]);
  });

  it('leaves range checks to the server (99 GPUs is sent)', () => {
    expect(buildSubmit(values({ gpus: '99' })).spec?.gpus).toBe(99);
    expect(buildSubmit(values({ gpus: '0' })).spec?.gpus).toBe(0);
  });

  it('stops what it cannot send', () => {
    const { spec, errors } = buildSubmit(
      values({
        notebook: ' ',
        gpus: 'two',
        maxRuntime: '-1',
        rows: [
          { name: 'a', value: '1' },
          { name: 'a', value: '2' }
        ]
      })
    );
    expect(spec).toBeUndefined();
    expect(Object.keys(errors).sort()).toEqual([
      'gpus',
      'maxRuntime',
      'notebook',
      'parameters.a'
    ]);
  });
});

describe('server fields', () => {
  it('map to form fields', () => {
    expect(formField('gpus')).toBe('gpus');
    expect(formField('max_runtime')).toBe('maxRuntime');
    expect(formField('gpu_type')).toBe('gpuType');
    expect(formField('notify')).toBe('notify');
    expect(formField('parameters.lr')).toBe('parameters.lr');
    expect(formField('id')).toBeNull();
    expect(formField(null)).toBeNull();
  });

  it('put the message next to the field, or on the form', () => {
    const form = new SubmitFormModel({ gpus: 1, priority: 'normal' });
    form.setError(
      new GPUSchedError(
        '99 GPUs requested but the cluster has 2 that this job may use',
        400,
        'invalid_value',
        'gpus'
      )
    );
    expect(form.errors).toEqual({
      gpus: '99 GPUs requested but the cluster has 2 that this job may use'
    });
    expect(form.formError).toBeNull();
    form.update({ gpus: '1' }); // editing the field clears its message
    expect(form.errors).toEqual({});
    form.setError(
      new GPUSchedError(
        'the request body must be a JSON object',
        400,
        'bad_json',
        null
      )
    );
    expect(form.formError).toBe('the request body must be a JSON object');
  });

  it('shows a refused notify target at the Notify me field', () => {
    const form = new SubmitFormModel({ gpus: 1, priority: 'normal' });
    form.update({ notify: 'not an address' });
    form.setError(
      new GPUSchedError(
        "notify target 'not an address' is not a webhook URL, email or apprise URL",
        400,
        'invalid_value',
        'notify'
      )
    );
    expect(Object.keys(form.errors)).toEqual(['notify']);
    expect(form.formError).toBeNull();
    form.update({ notify: '' });
    expect(form.errors).toEqual({});
  });

  it('applies new defaults only to untouched fields', () => {
    const form = new SubmitFormModel({ gpus: 1, priority: 'normal' });
    form.update({ priority: 'low' });
    form.setDefaults(
      { gpus: 1, priority: 'normal' },
      { gpus: 2, priority: 'high' }
    );
    expect(form.values.gpus).toBe('2');
    expect(form.values.priority).toBe('low');
  });
});
