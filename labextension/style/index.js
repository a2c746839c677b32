import './base.css';
import './budgets.css';
