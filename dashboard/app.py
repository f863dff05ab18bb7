"""Entry script of the operator dashboard: ``streamlit run`` this file (``retrylens dashboard`` does)."""

from retrylens.dashboard.nav import main

main()
