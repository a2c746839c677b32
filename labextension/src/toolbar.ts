/*
 * Toolbar buttons that never toggle.
 */
import { ReactWidget, ToolbarButtonComponent } from '@jupyterlab/ui-components';
import * as React from 'react';

/**
 * A toolbar button like JupyterLab's `ToolbarButton`, less its `aria-pressed="false"`: that widget
 * always renders a pressed state, which its `jp-button` host may not carry (axe-core's
 * aria-allowed-attr, a critical WCAG 2.1 A failure). These buttons act; they are never on or off.
 */
export function actionButton(
  props: ToolbarButtonComponent.IProps
): ReactWidget {
  const widget = ReactWidget.create(
    React.createElement(ToolbarButtonComponent, props)
  );
  widget.addClass('jp-ToolbarButton');
  return widget;
}
